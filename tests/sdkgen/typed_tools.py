"""Python tools as users write them, whose schemas ``@ptc.tool`` derives from the type
hints through pydantic: models, TypedDicts, dataclasses, enums and literals (``$defs`` and
``{"$ref": "#/$defs/Name"}``), and recursive models."""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

import ptc

from .shapes import Schema


class Color(enum.StrEnum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(description="The city.")
    postcode: str | None = None


class Person(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    home: Address = Field(description="Where they live.")
    work: Address | None = None
    favourite: Color = Color.RED
    tags: set[str] = set()
    born: datetime.date | None = None


class Point(TypedDict):
    x: float
    y: float


@dataclass
class Box:
    low: Point
    high: Point
    label: Literal["crate", "parcel"] = "crate"


T = TypeVar("T")


class Page(BaseModel, Generic[T]):
    items: list[T]
    next: str | None = None


class Status(BaseModel):
    state: Literal["done"]
    priority: Priority
    by_city: dict[str, list[Address]] = {}


def create_person(person: Person) -> Person:
    """A model in and out."""
    return person


def find_people(city: str, near: Point | None = None,
                limit: Annotated[int, Field(ge=1)] = 10) -> Page[Person]:  # fmt: skip
    """Optional[TypedDict] in, a generic model of models out."""
    raise NotImplementedError


def move(who: list[Person], to: Address, via: Address | None = None) -> dict[str, Address]:
    """list[Model], a model used twice, dict[str, Model] out."""
    raise NotImplementedError


def paint(box: Box, color: Color = Color.RED, priority: Priority = Priority.LOW) -> list[Color]:
    """A dataclass, enums of strings and integers, list[Enum] out."""
    raise NotImplementedError


def switch(state: Literal["on", "off"], mode: Literal["fast"] = "fast") -> Status:
    """Literals (one value is a const), a model of enums and maps of lists of models."""
    raise NotImplementedError


def lookup(people: dict[str, Person], key: str) -> Person | None:
    """dict[str, Model] in, Optional[Model] out."""
    raise NotImplementedError


TOOLS = [create_person, find_people, move, paint, switch, lookup]


def schemas(function: Any) -> tuple[Schema, Schema]:
    """The input and output schemas ``@ptc.tool`` derives for ``function``."""
    definition = ptc.tool(function)
    return dict(definition.input_schema), dict(definition.output.schema)


# -- recursive models: left to the generator ------------------------------------------------


class Node(BaseModel):
    label: str
    children: list[Node] = []


class Ping(BaseModel):
    pong: Pong | None = None


class Pong(BaseModel):
    ping: Ping | None = None


class Forest(BaseModel):
    trees: list[Node]


def plant(root: Node) -> Forest:
    """A model that contains itself, in and (inside another) out."""
    raise NotImplementedError


def serve(ping: Ping) -> None:
    """Two models that contain each other."""
    raise NotImplementedError
