"""Learning from traffic: what answered requests teach the planner, per tenant.

After an answer (never on its path) the run is turned into counts
(:mod:`.feedback`): each executed edge (tool A's output fed tool B) with B's outcome,
each pick with the candidates it beat, and in select mode which forwarded tools the
model called. They are kept per tenant, bounded and masked, in Redis or in process
(:mod:`.store`, one Protocol, one test suite over both). The planner's re-ranking reads
a tenant's edge counts as a Beta posterior over the offline edge trust
(:mod:`.evidence`): a few requests cannot swing it, a tool never run keeps exactly
today's evidence, and one tenant's traffic never reaches another's plans. The
catalog search reads the queries each tool served as a k-NN vote (:mod:`.traffic`),
rebuilt per tenant beside the requests and rolled back when a held-out slice of the
tenant's own traffic gets worse (:mod:`.retrieval`).
:class:`.service.Learner` ties them together; the admin API (:mod:`.router`) and
``toolgraph learning`` (:mod:`.command`) inspect, export and reset one tenant's state.
"""
