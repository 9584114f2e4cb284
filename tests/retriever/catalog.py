"""A small hand-made catalog for the retriever tests: distinct tools in four categories."""

from __future__ import annotations

from graph_store.models import Provenance, Tool

_TOOLS = [
    (
        "get_weather_forecast",
        "weather",
        "openweather",
        "Weather forecast for a city: temperature, rain and wind for the next days.",
        {"city": "City name"},
    ),
    (
        "get_air_quality",
        "weather",
        "openweather",
        "Air pollution index and quality measurements for a location.",
        {"lat": "Latitude", "lon": "Longitude"},
    ),
    (
        "search_flights",
        "travel",
        "skyscanner",
        "Search flights between two airports on a date.",
        {"origin": "Departure airport", "destination": "Arrival airport", "date": "Day of travel"},
    ),
    (
        "book_hotel",
        "travel",
        "booking",
        "Reserve a hotel room in a city for given dates.",
        {"city": "City", "check_in": "Arrival date"},
    ),
    (
        "convert_currency",
        "finance",
        "fx",
        "Convert an amount of money from one currency to another at today's rate.",
        {"amount": "Amount", "from": "Source currency", "to": "Target currency"},
    ),
    (
        "get_stock_price",
        "finance",
        "markets",
        "Latest stock price and daily change for a ticker symbol.",
        {"symbol": "Ticker"},
    ),
    (
        "send_email",
        "communication",
        "mailer",
        "Send an email message to a recipient with subject and body.",
        {"to": "Recipient address", "subject": "Subject"},
    ),
    (
        "send_sms",
        "communication",
        "twilio",
        "Send a text message (SMS) to a phone number.",
        {"phone": "Phone number", "text": "Message"},
    ),
    (
        "translate_text",
        "communication",
        "translator",
        "Translate text between languages.",
        {"text": "Text", "target_language": "Language code"},
    ),
    (
        "vin_decoder",
        "automotive",
        "carapi",
        "Decode a vehicle identification number (VIN) into make, model and year.",
        {"vin": "The 17-character VIN"},
    ),
]


def catalog_tools() -> list[Tool]:
    return [
        make_tool(name, category, group, description, params)
        for name, category, group, description, params in _TOOLS
    ]


def make_tool(
    name: str, category: str, group: str, description: str, params: dict[str, str]
) -> Tool:
    return Tool(
        id=f"test:{group}:{name}",
        name=name,
        original_name=name,
        description=description,
        category=category,
        group=group,
        parameters={
            "type": "object",
            "properties": {p: {"type": "string", "description": d} for p, d in params.items()},
            "required": list(params)[:1],
        },
        provenance=Provenance(format="test", item=name),
    )
