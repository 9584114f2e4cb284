"""Three hundred client tools in OpenAI's format, for select mode's tests."""

from __future__ import annotations

from typing import Any

_NOUNS = [
    ("flight", "airline flight booking"),
    ("hotel_room", "hotel room reservation"),
    ("invoice", "customer invoice in the billing system"),
    ("calendar_event", "meeting or event in a calendar"),
    ("email_draft", "email draft in the mailbox"),
    ("support_ticket", "customer support ticket"),
    ("github_issue", "issue in a GitHub repository"),
    ("playlist", "music playlist"),
    ("recipe", "cooking recipe"),
    ("stock_quote", "stock market quote for a ticker"),
    ("exchange_rate", "currency exchange rate"),
    ("shipment", "parcel shipment tracking"),
    ("restaurant_table", "restaurant table booking"),
    ("car_rental", "rental car booking"),
    ("user_account", "user account in the identity system"),
    ("database_backup", "database backup snapshot"),
    ("vm_instance", "cloud virtual machine instance"),
    ("dns_record", "DNS record of a domain"),
    ("blog_post", "blog post on the website"),
    ("photo_album", "photo album"),
    ("expense_report", "employee expense report"),
    ("job_posting", "job posting on the careers page"),
    ("product_review", "product review in the shop"),
    ("shopping_cart", "shopping cart of a customer"),
    ("translation", "text translation between languages"),
    ("news_article", "news article"),
    ("podcast_episode", "podcast episode"),
    ("fitness_workout", "fitness workout log"),
    ("medical_appointment", "doctor's appointment"),
]
_VERBS = [
    "get",
    "create",
    "update",
    "delete",
    "list",
    "search",
    "cancel",
    "export",
    "share",
    "archive",
]


_SINGLE = [
    ("get_weather_forecast", "Weather forecast for a city: temperature, rain and wind by day."),
    ("get_air_quality", "Air pollution and pollen levels at a location."),
    ("convert_units", "Convert a quantity between units of measure."),
    ("send_sms", "Send a text message to a phone number."),
    ("get_sunrise_times", "Sunrise and sunset times for a place and date."),
    ("lookup_word", "Dictionary definition and synonyms of a word."),
    ("roll_dice", "Roll dice and return the numbers."),
    ("get_public_holidays", "Public holidays of a country in a year."),
    ("find_nearby_pharmacy", "Pharmacies open near an address."),
    ("calculate_mortgage", "Monthly payment of a mortgage loan."),
]


def client_tools() -> list[Any]:
    """290 tools that are ten verbs on 29 nouns, and ten tools of their own kind."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": description,
                "parameters": {"type": "object", "properties": {}, "required": []},
            },
        }
        for name, description in _SINGLE
    ]
    for noun, what in _NOUNS:
        for verb in _VERBS:
            tools.append(
                {
                    "type": "function",
                    "function": {
                        "name": f"{verb}_{noun}",
                        "description": f"{verb.capitalize()} a {what}.",
                        "parameters": {
                            "type": "object",
                            "properties": {"id": {"type": "string", "description": f"The {what}"}},
                            "required": [],
                        },
                    },
                }
            )
    return tools


COUNTRIES = [
    "Argentina", "Australia", "Austria", "Belgium", "Brazil", "Canada", "Chile", "China",
    "Denmark", "Egypt", "Finland", "France", "Germany", "Greece", "India", "Indonesia",
    "Ireland", "Italy", "Japan", "Kenya", "Mexico", "Morocco", "Netherlands", "Norway",
    "Peru", "Poland", "Portugal", "Spain", "Sweden", "Switzerland", "Thailand", "Turkey",
]  # fmt: skip


def visa_tool() -> Any:
    return {
        "type": "function",
        "function": {
            "name": "check_visa_rules",
            "description": "Visa requirements for travelling to a country.",
            "parameters": {
                "type": "object",
                "properties": {
                    "country": {"type": "string", "enum": COUNTRIES, "default": "Austria"},
                    "purpose": {"type": "string", "enum": ["tourism", "business"]},
                },
                "required": ["country"],
            },
        },
    }
