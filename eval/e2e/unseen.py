"""Questions written before the changes they measure, in two fixed parts.

The same three kinds and checker as :mod:`eval.e2e.tasks`, over the built-in pack,
written from the failure kinds of an outside evaluation (SI prefixes, a derivative's
order, a magnitude of a sum, a product of two results, general knowledge) but not
from its questions, and before any change they test:

* ``DEV`` (``--suite dev``, 14 questions): what changes may be checked against;
* ``ASIDE`` (``--suite aside``, 7 questions, a third of each kind): no change is
  tuned on them; their figures are reported separately.
"""

from __future__ import annotations

from eval.e2e.tasks import Task

DEV: tuple[Task, ...] = (
    Task(
        "u_second_derivative", "single",
        "What is the second derivative of x**5 - 3*x**2 at x = 1.5?",
        (61.5,), tools=("calculate_derivative",),
    ),
    Task(
        "u_integral_sin2", "single", "Evaluate the definite integral of sin(x)**2 from 0 to 2.",
        (1.1892006,), tools=("calculate_integral",),
    ),
    Task(
        "u_angle", "single", "Find the angle in degrees between the vectors [2, -1, 0] and "
        "[1, 3, 2].",
        (96.86457,), tools=("vector_operation",),
    ),
    Task(
        "u_charge_nc", "single", "A point charge of 5 nC sits at the origin. What is the "
        "electric field magnitude at the point (0, 0, 3) m, in N/C?",
        (4.993084,), tools=("run_simulation",),
    ),
    Task(
        "u_de_broglie", "single", "What is the de Broglie wavelength h/(m_e*v) of an "
        "electron moving at 2.0e6 m/s, in metres?",
        (3.636948e-10,), tools=("evaluate_expression",),
    ),
    Task(
        "u_integral_times_slope", "multi", "Compute the integral of 3*x**2 from 1 to 4 and "
        "the derivative of x**3 at x = 2, then multiply the two results.",
        (756.0,), tools=("calculate_integral", "calculate_derivative", "evaluate_expression"),
    ),
    Task(
        "u_sum_magnitude", "multi", "What is the magnitude of the sum of the vectors "
        "[1, 2, 2] and [3, 0, 1]?",
        (5.385165,), tools=("vector_operation",),
    ),
    Task(
        "u_dot_over_norm", "multi", "Find the dot product of [2, 3, 1] and [4, -1, 6], then "
        "divide it by the magnitude of [3, 4].",
        (2.2,), tools=("vector_operation", "evaluate_expression"),
    ),
    Task(
        "u_resistor_power", "multi", "A 4.7 kOhm resistor carries 3 mA. Compute the voltage "
        "V = I*R across it, then the power P = V**2/R it dissipates, in watts.",
        (0.0423,), tools=("evaluate_expression",),
    ),
    Task(
        "u_greeting", "none", "Good morning! How are you today?",
        words=r"good|well|fine|great|help|thank",
    ),
    Task("u_gold", "none", "What is the chemical symbol for gold?", words=r"\bAu\b"),
    Task("u_mona_lisa", "none", "Who painted the Mona Lisa?", words=r"Leonardo|da Vinci"),
    Task(
        "u_continents", "none", "How many continents are there on Earth?",
        words=r"\bseven\b|\b7\b",
    ),
    Task(
        "u_field_sentence", "none", "In one sentence, what is an electric field?",
        words=r"force|charge",
    ),
)  # fmt: skip

ASIDE: tuple[Task, ...] = (
    Task(
        "u_wire_10a", "single", "What is the magnetic field 0.2 m from a long straight wire "
        "carrying 10 A, in tesla?",
        (1.0e-5,), tools=("run_simulation",),
    ),
    Task(
        "u_cross", "single", "Compute the cross product of [3, -1, 2] and [0, 4, -5].",
        (-3.0, 15.0, 12.0), tools=("vector_operation",),
    ),
    Task(
        "u_lc_frequency", "single", "What is the resonant frequency 1/(2*pi*sqrt(L*C)) of an "
        "LC circuit with L = 2 mH and C = 50 nF, in hertz?",
        (15915.49,), tools=("evaluate_expression",),
    ),
    Task(
        "u_exp_times_slope", "multi", "Integrate exp(-2*x) from 0 to 1, then multiply the "
        "result by the derivative of x**2 at x = 3.",
        (2.593994,), tools=("calculate_integral", "calculate_derivative", "evaluate_expression"),
    ),
    Task(
        "u_angle_to_cross", "multi", "Find the angle in degrees between [1, 0, 0] and the "
        "cross product of [1, 1, 0] and [0, 1, 1].",
        (54.73561,), tools=("vector_operation",),
    ),
    Task("u_planet", "none", "What is the largest planet in our solar system?", words=r"Jupiter"),
    Task("u_bye", "none", "Bye, see you tomorrow!", words=r"bye|see you|take care|good"),
)  # fmt: skip
