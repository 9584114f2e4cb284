"""Requests users send with no tool in mind, made from templates (the ``templates`` source).

Five kinds, as the gate sees them in practice: general knowledge a model knows, writing
(drafts, rewrites, summaries of text the user gives), coding (explain, write, fix a
snippet), chit-chat, and arithmetic a model does by heart. Each template is filled from
short slot lists with a fixed seed; each request is paired, like the chit-chat and
NQ-open rows, with a catalog drawn from the other sources (it needs no tool whatever is
offered). The source is scored left out like every other, and the real no-tool sources
(chit-chat, NQ-open, CLINC150's small talk and out-of-scope requests) stay the measure.
"""

from __future__ import annotations

import random

#: Requests per kind.
PER_KIND = 80

_TOPICS = (
    "photosynthesis", "the French Revolution", "black holes", "the immune system",
    "supply and demand", "the Roman Empire", "plate tectonics", "quantum entanglement",
    "the water cycle", "inflation", "natural selection", "the printing press",
    "the Cold War", "DNA replication", "impressionism", "the stock market", "climate",
    "the Renaissance", "vaccines", "electricity", "gravity", "democracy", "jazz",
)  # fmt: skip
_WHO = (
    "Shakespeare", "Marie Curie", "Napoleon", "Ada Lovelace", "Gandhi", "Beethoven",
    "Cleopatra", "Einstein", "Frida Kahlo", "Aristotle", "Nelson Mandela", "Darwin",
)  # fmt: skip
_THINGS = (
    "a cover letter", "a thank-you note", "a short poem", "a wedding toast", "a haiku",
    "a product description", "a limerick", "an apology email", "a birthday message",
    "a LinkedIn summary", "a bedtime story", "a resignation letter", "a speech intro",
)  # fmt: skip
_ABOUT = (
    "my grandmother", "autumn", "our team's launch", "a lost cat", "moving abroad",
    "my first job", "the ocean", "friendship", "a rainy Sunday", "learning to cook",
)  # fmt: skip
_LANGS = ("Python", "JavaScript", "Rust", "Go", "Java", "C", "SQL", "TypeScript", "Bash")
_CODE = (
    "reverses a string", "checks whether a number is prime", "merges two sorted lists",
    "removes duplicates from a list", "counts the words in a sentence", "flattens a nested list",
    "computes a factorial recursively", "parses a date string", "implements binary search",
)  # fmt: skip
_CONCEPTS = (
    "a closure", "recursion", "a race condition", "big-O notation", "a hash map",
    "dependency injection", "a mutex", "tail recursion", "polymorphism", "a generator",
)  # fmt: skip

_KINDS: dict[str, tuple[str, ...]] = {
    "general_knowledge": (
        "Explain {topic} in simple terms.",
        "What caused {topic}?",
        "Who was {who} and why are they famous?",
        "Give me a short overview of {topic}.",
        "Why is {topic} important?",
        "What is the difference between {topic} and {topic2}?",
        "Can you tell me a few facts about {who}?",
        "How would you explain {topic} to a ten-year-old?",
    ),
    "writing": (
        "Write {thing} about {about}.",
        "Help me draft {thing} for {about}.",
        "Can you make this sentence sound more formal: 'we gotta move the meeting'?",
        "Rewrite this paragraph to be shorter: {about} taught me patience and humour.",
        "Suggest a title for an essay about {about}.",
        "Proofread this: 'their going to the park tomorow with there dog'.",
        "Give me three opening lines for {thing}.",
    ),
    "coding": (
        "Write a {lang} function that {code}.",
        "Explain what {concept} is in {lang}.",
        "What is wrong with this {lang} code: for i in range(10) print(i)",
        "How do I write a loop in {lang}?",
        "Show me an example of {concept}.",
        "What's the difference between a list and a tuple in Python?",
        "Refactor this to be more readable: if x == True: return True else: return False",
    ),
    "chitchat": (
        "Hi there!",
        "How are you today?",
        "Thanks, that was helpful.",
        "You're awesome.",
        "Good night!",
        "What's your favourite {topic_short}?",
        "I'm bored, talk to me.",
        "Do you like {topic_short}?",
        "Haha, that's funny.",
        "Can we just chat for a bit?",
        "ok",
        "Nice to meet you, I'm {name}.",
    ),
    "arithmetic": (
        "What is {a} plus {b}?",
        "What's {a} times {small}?",
        "How much is {a} minus {b}?",
        "What is half of {even}?",
        "Is {a} an even number?",
        "What is {small} squared?",
        "How many minutes are in {small} hours?",
        "What's 10 percent of {round}?",
    ),
}
_SHORT = ("movie", "colour", "season", "food", "book", "music", "sport", "animal")
_NAMES = ("Sam", "Priya", "Lena", "Tom", "Aiko", "Omar", "Julia")


def template_requests(seed: int = 13, per_kind: int = PER_KIND) -> list[tuple[str, str, str]]:
    """``(id, kind, request)``: ``per_kind`` distinct requests of each kind, seeded."""
    draw = random.Random(f"{seed}:templates")
    made: list[tuple[str, str, str]] = []
    for kind, templates in _KINDS.items():
        seen: set[str] = set()
        for _ in range(per_kind * 20):
            if len(seen) == per_kind:
                break
            text = _fill(draw.choice(templates), draw)
            if text not in seen:
                seen.add(text)
                made.append((f"templates_{kind}_{len(seen)}", kind, text))
    return made


def _fill(template: str, draw: random.Random) -> str:
    topic, topic2 = draw.sample(_TOPICS, 2)
    return template.format(
        topic=topic,
        topic2=topic2,
        who=draw.choice(_WHO),
        thing=draw.choice(_THINGS),
        about=draw.choice(_ABOUT),
        lang=draw.choice(_LANGS),
        code=draw.choice(_CODE),
        concept=draw.choice(_CONCEPTS),
        topic_short=draw.choice(_SHORT),
        name=draw.choice(_NAMES),
        a=draw.randint(2, 99),
        b=draw.randint(2, 99),
        small=draw.randint(2, 12),
        even=2 * draw.randint(2, 60),
        round=10 * draw.randint(2, 50),
    )
