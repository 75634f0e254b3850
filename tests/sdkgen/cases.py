"""The representative tool set behind the golden files and the type-check test."""

from __future__ import annotations

from pathlib import Path

from sdkgen import ToolSpec

GOLDEN_DIR = Path(__file__).with_name("golden")
HEADER = "ptc SDK (representative set). Call tools.<name>(...); see docstrings."

_PASSENGER = {
    "type": "object",
    "description": "One traveller",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "kind": {"enum": ["adult", "child", "infant"]},
    },
    "required": ["name", "kind"],
    "additionalProperties": False,
}

CASES: dict[str, list[ToolSpec]] = {
    "nested": [
        ToolSpec(
            name="search_flights",
            description="Find flights between two airports.\n\nResults are sorted by price.",
            input_schema={
                "type": "object",
                "properties": {
                    "route": {
                        "type": "object",
                        "description": "Where to fly",
                        "properties": {
                            "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                            "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                        },
                        "required": ["origin", "destination"],
                    },
                    "passengers": {"type": "array", "items": _PASSENGER, "minItems": 1},
                    "max_price": {"type": "number", "exclusiveMinimum": 0},
                },
                "required": ["route", "passengers"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {
                    "flights": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "description": "Flight id"},
                                "legs": {
                                    "type": "array",
                                    "items": {"type": "array", "items": {"type": "string"}},
                                },
                                "price": {"type": "number"},
                            },
                            "required": ["id", "price"],
                        },
                    }
                },
                "required": ["flights"],
            },
        )
    ],
    "refs": [
        ToolSpec(
            name="tree_walk",
            description="Walk a tree of nodes.",
            input_schema={
                "type": "object",
                "$defs": {
                    "Node": {
                        "type": "object",
                        "properties": {
                            "label": {"type": "string"},
                            "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                        },
                        "required": ["label"],
                    }
                },
                "properties": {"root": {"$ref": "#/$defs/Node"}},
                "required": ["root"],
            },
            output_schema={
                "type": "object",
                "$defs": {"Count": {"type": "integer", "minimum": 0}},
                "properties": {"visited": {"$ref": "#/$defs/Count"}},
                "required": ["visited"],
            },
        )
    ],
    "enums": [
        ToolSpec(
            name="set_status",
            description="Set a status.",
            input_schema={
                "type": "object",
                "properties": {
                    "status": {
                        "enum": ["open", "closed", "wontfix"],
                        "enumDescriptions": ["in progress", "done", "declined"],
                    },
                    "level": {
                        "oneOf": [
                            {"const": 1, "description": "low"},
                            {"const": 2, "description": "high"},
                        ]
                    },
                },
                "required": ["status"],
                "additionalProperties": False,
            },
            output_schema={
                "type": "object",
                "properties": {"previous": {"enum": ["open", "closed", "wontfix"]}},
                "required": ["previous"],
            },
        )
    ],
    "unions": [
        ToolSpec(
            name="pay",
            description="Pay with a card or a voucher.",
            input_schema={
                "type": "object",
                "properties": {
                    "method": {
                        "oneOf": [
                            {
                                "type": "object",
                                "properties": {"card_number": {"type": "string"}},
                                "required": ["card_number"],
                            },
                            {
                                "type": "object",
                                "properties": {"voucher": {"type": "string"}},
                                "required": ["voucher"],
                            },
                        ]
                    },
                    "amount": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
                    "note": {"type": ["string", "null"]},
                    "tags": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "required": ["method", "amount"],
            },
            output_schema={
                "type": "object",
                "properties": {"receipt": {"type": ["string", "null"]}},
                "required": ["receipt"],
            },
        )
    ],
    "reserved": [
        ToolSpec(
            name="class",
            description="A keyword as a tool name.",
            input_schema={
                "type": "object",
                "properties": {
                    "from": {"type": "string"},
                    "import": {"type": "boolean"},
                    "filter": {"type": "string"},
                },
                "required": ["from"],
            },
            output_schema={"type": "string"},
        ),
        ToolSpec(name="list", description="A builtin as a tool name."),
        ToolSpec(name="tools", description="Collides with the namespace."),
        ToolSpec(name="tools_", description="Keeps its name."),
    ],
    "non_identifier_keys": [
        ToolSpec(
            name="get-weather.v2",
            description="Weather with odd keys.",
            input_schema={
                "type": "object",
                "properties": {
                    "my-city": {"type": "string"},
                    "2fa": {"type": "string"},
                    "my_city": {"type": "string"},
                },
                "required": ["my-city"],
            },
            output_schema={
                "type": "object",
                "properties": {"temp-c": {"type": "number"}, "class": {"type": "string"}},
                "required": ["temp-c"],
            },
        )
    ],
    "no_output": [
        ToolSpec(
            name="log_event",
            description='Log an event. Quotes """ and a \\ backslash survive.',
            input_schema={
                "type": "object",
                "properties": {"message": {"type": "string", "maxLength": 200}},
                "required": ["message"],
            },
        )
    ],
    "zero_args": [
        ToolSpec(
            name="now",
            description="The current time.",
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
            output_schema={
                "type": "object",
                "properties": {"iso": {"type": "string", "format": "date-time"}},
                "required": ["iso"],
            },
        )
    ],
    "open_objects": [
        ToolSpec(
            name="annotate",
            description="Label a record; other keys are kept as they are.",
            input_schema={
                "type": "object",
                "properties": {
                    "record": {
                        "type": "object",
                        "properties": {
                            "id": {"type": "string"},
                            "meta": {
                                "type": "object",
                                "properties": {"source": {"type": "string"}},
                            },
                        },
                        "required": ["id"],
                    },
                    "label": {"type": "string"},
                    "extra": {"type": "integer", "description": "Takes the usual ** name."},
                },
                "required": ["record"],
            },
            output_schema={
                "type": "object",
                "properties": {
                    "record": {"type": "object", "properties": {"id": {"type": "string"}}}
                },
            },
        ),
        ToolSpec(
            name="anything", description="No declared parameters: any keys go.", output_schema={}
        ),
        ToolSpec(
            name="patterned",
            description="Keys matching a pattern are accepted besides the declared ones.",
            input_schema={
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "patternProperties": {"^x-": {"type": "string"}},
                "additionalProperties": False,
            },
            output_schema=True,
        ),
    ],
    "dialects": [
        ToolSpec(
            name="legacy_range",
            description="draft-04: a boolean exclusiveMinimum.",
            input_schema={
                "$schema": "http://json-schema.org/draft-04/schema#",
                "type": "object",
                "properties": {"low": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
                "required": ["low"],
                "additionalProperties": False,
            },
        ),
        ToolSpec(
            name="pair",
            description="draft-07: items as an array (a tuple).",
            input_schema={
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "object",
                "properties": {
                    "point": {"type": "array", "items": [{"type": "number"}, {"type": "string"}]}
                },
                "required": ["point"],
                "additionalProperties": False,
            },
            output_schema={
                "$schema": "http://json-schema.org/draft-07/schema#",
                "type": "array",
                "items": [{"type": "number"}, {"type": "string"}],
                "additionalItems": {"type": "boolean"},
            },
        ),
    ],
    "long_name": [
        ToolSpec(
            name="mcp.server-" + "very_long_segment." * 6 + "x" * 9,
            description="A 128-character name (MCP's limit).",
            input_schema={
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "additionalProperties": False,
            },
        )
    ],
    "unsupported": [
        ToolSpec(
            name="odd",
            description="Schemas the generator cannot handle fall back to JSON.",
            input_schema={"type": "object", "properties": {"x": {"type": 5}}},
            output_schema={"type": 5},
        )
    ],
}


def all_specs() -> list[ToolSpec]:
    return [spec for specs in CASES.values() for spec in specs]
