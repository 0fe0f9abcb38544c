"""The task-type registry: each task type registers itself once, in its own module.

A :class:`TaskType` says everything the rest of embedscope needs about a type: mteb's type name, the route
prefixes of ``TYPE:PATH`` (``sts:pairs.csv``), its usual main score, its task class, how to read a user's
files into a task, how to build a catalog task, which of mteb's ``AbsTask`` classes it reproduces (the
catalog's ``protocol``) and its ``task_params`` parameters. ``custom_task``, ``catalog_task``,
``scripts/build_catalog.py``, the report and the CLI's help read it; a new type is one module.

>>> get_task_type("pair-classification").name
'PairClassification'
>>> get_task_type("sts").main_score
'cosine_spearman'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from embedscope.errors import UnknownNameError

if TYPE_CHECKING:
    from embedscope.tasks.base import Task
    from embedscope.tasks.catalog import CatalogEntry

# (folder or file, its column names or None, the task's fields: name, eval_splits, source, main_score?, params) → task
FileReader = Callable[[Path, "dict[str, str] | None", "dict[str, Any]"], "Task"]
# (catalog entry, hf subset, data location: a local folder or the hub id) → task
CatalogBuilder = Callable[["CatalogEntry", str, str], "Task"]
# --task-param NAME → (the task field it sets, converter of the given value)
TaskParams = Mapping[str, "tuple[str, Callable[[Any], Any]]"]

# the modules of the built-in types, imported (and so registered) on the registry's first use
BUILTIN_MODULES = (
    "retrieval",
    "reranking",
    "sts",
    "classification",
    "pair_classification",
    "multilabel",
    "clustering",
    "bitext_mining",
    "summarization",
    "instructions",
)


def route_key(name: str) -> str:
    """The spelling a type name or alias is looked up by: stripped, lower case, no ``_``."""
    return name.strip().lower().replace("_", "")


@dataclass(frozen=True)
class TaskType:
    """One task type: ``name`` is mteb's (``"PairClassification"``); ``aliases`` are route prefixes besides
    the name's lower case; ``mteb_protocols`` maps mteb ``AbsTask`` class names to the catalog's protocol.

    What the rest of embedscope asks of a type:

    - ``model_roles``: the model roles its protocol can evaluate (:mod:`embedscope.retrieval.roles`: ``encoder``,
      ``searcher``, ``candidate_scorer``); a model offering none of them is refused before it runs;
    - ``run_options``: for a type registered outside embedscope, the run settings beyond the shared ones that act
      on it (``top_k`` …); embedscope's own types are named by each option's declaration
      (:mod:`embedscope.settings.options`: ``acts={"task_type": [...]}``); one given for a run none of whose tasks
      it acts on is an error;
    - ``pairwise_score``: its main score is a statistic of all pairs (STS, pair classification), so comparisons
      bootstrap over pairs rather than averaging per-item scores;
    - ``signature_score`` / ``signature_rank``: a score key that only its results hold, to recognise a result
      file of a task embedscope does not know (lower rank is tried first);
    - ``document_label``: what progress bars call the texts it encodes as documents;
    - ``proxy``: how a split's data is reduced to a proxy (``(data, ProxySpec) -> (reduced data, composition)``,
      built from :mod:`embedscope.tasks.proxy`'s reducers; None: the type has no proxy, and a screen with proxies
      refuses its tasks).

    Examples:
        >>> from embedscope.tasks.types import get_task_type
        >>> sts = get_task_type("STS")
        >>> sts.main_score, sts.pairwise_score
        ('cosine_spearman', True)
    """

    name: str
    task_class: type
    main_score: str
    aliases: tuple[str, ...] = ()
    read_files: FileReader | None = field(default=None, repr=False)
    from_catalog: CatalogBuilder | None = field(default=None, repr=False)
    mteb_protocols: tuple[tuple[str, str], ...] = ()
    params: TaskParams = field(default_factory=dict, repr=False)
    model_roles: tuple[str, ...] = ("encoder",)
    run_options: tuple[str, ...] = ()
    pairwise_score: bool = False
    signature_score: str | None = None
    signature_rank: int = 100
    document_label: str = "texts"
    proxy: Callable[[Any, Any], tuple[Any, dict[str, Any]]] | None = field(default=None, repr=False)

    def route_keys(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(route_key(n) for n in (self.name, *self.aliases)))


class TaskTypeRegistry:
    """Task types by name and alias (case-insensitive, ``_`` ignored); unknown names suggest close matches."""

    def __init__(self, builtin_modules: tuple[str, ...] = ()) -> None:
        self._types: dict[str, TaskType] = {}
        self._routes: dict[str, str] = {}
        self._builtin_modules = builtin_modules
        self._loaded = not builtin_modules

    def register(self, spec: TaskType) -> TaskType:
        """Adds ``spec``; a name or alias that is already taken is an error."""
        taken = [k for k in spec.route_keys() if k in self._routes]
        if spec.name in self._types or taken:
            raise ValueError(f"task type {spec.name!r}: {taken or [spec.name]} already registered")
        self._types[spec.name] = spec
        self._routes.update(dict.fromkeys(spec.route_keys(), spec.name))
        return spec

    def unregister(self, name: str) -> None:
        """Removes a type (tests registering a toy type clean up with this)."""
        spec = self._types.pop(self.get(name).name)
        for key in spec.route_keys():
            del self._routes[key]

    def _load_builtin(self) -> None:
        if not self._loaded:
            self._loaded = True
            for module in self._builtin_modules:
                importlib.import_module(f"embedscope.tasks.{module}")

    def find(self, name: str) -> TaskType | None:
        """The type of that name or alias, or None."""
        self._load_builtin()
        canonical = self._routes.get(route_key(name))
        return self._types[canonical] if canonical else None

    def get(self, name: str) -> TaskType:
        """The type of that name or alias; an unknown one is an error listing the registered types."""
        spec = self.find(name)
        if spec is None:
            raise UnknownNameError("task type", name, self.names())
        return spec

    def names(self) -> list[str]:
        """The registered types' names: the built-ins in their modules' order, then the others as registered."""
        self._load_builtin()
        modules = [f"embedscope.tasks.{m}" for m in self._builtin_modules]

        def rank(name: str) -> int:
            module = self._types[name].task_class.__module__
            return modules.index(module) if module in modules else len(modules)

        return sorted(self._types, key=rank)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.find(name) is not None

    def __iter__(self) -> Iterator[TaskType]:
        return iter([self._types[n] for n in self.names()])

    def by_signature(self, keys: set[str]) -> TaskType | None:
        """The type whose signature score is among ``keys`` (lowest ``signature_rank`` first), or None."""
        ranked = sorted((t for t in self if t.signature_score), key=lambda t: t.signature_rank)
        return next((t for t in ranked if t.signature_score in keys), None)


TASK_TYPES = TaskTypeRegistry(BUILTIN_MODULES)


def register_task_type(spec: TaskType) -> TaskType:
    """Registers a task type (called once, at the bottom of the type's module).

    Examples:
        A toy type (``tests/tasks/test_task_type_registry.py`` runs one end to end):

        >>> from dataclasses import dataclass
        >>> from typing import ClassVar
        >>> from embedscope import TaskType, register_task_type
        >>> from embedscope.tasks.base import TaskInfo
        >>> from embedscope.tasks.types import TASK_TYPES, get_task_type
        >>> @dataclass(frozen=True)
        ... class WordCountTask(TaskInfo):
        ...     type: ClassVar[str] = "WordCount"
        >>> _ = register_task_type(TaskType("WordCount", WordCountTask, main_score="spearman"))
        >>> get_task_type("wordcount").name
        'WordCount'
        >>> TASK_TYPES.unregister("WordCount")
    """
    return TASK_TYPES.register(spec)


def get_task_type(name: str) -> TaskType:
    return TASK_TYPES.get(name)


class TypeNames:
    """The registered types' names, joined only when printed: a CLI help text that imports the task
    modules when help is shown, not on every start."""

    def __init__(self, separator: str = " | ") -> None:
        self.separator = separator

    def __str__(self) -> str:
        return self.separator.join(TASK_TYPES.names())
