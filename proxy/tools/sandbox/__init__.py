"""Where a hostile input cannot hurt the proxy: ``runner`` (the proxy's side,
:class:`~proxy.tools.sandbox.runner.Sandbox`) and ``forkserver`` (the process it starts,
which forks one child per call)."""
