"""The judge's view of the program: references to its objects, and the link they call through.

:class:`Remote` stands, in the tests' namespace, for a function, class or object of the
program: calling it (or iterating it, indexing it, ...) sends a request over the socket pair
(:class:`Link`) and rebuilds the answer from plain data (:mod:`.plaindata`). An exception the
program raised is rebuilt as a class of the same name derived from the same builtin
exception (:func:`remote_exception`). Nothing here runs code of the program.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from .channel import ChannelAbuse, ChannelClosed
from .harness import _PRISTINE_BUILTINS, BoundedText
from .plaindata import HashFlood, NotPlainData, from_tree, to_tree

# Names of the standard library's modules: a global of the program by such a name is never an attribute
# base for the tests (see Remote.__getattr__).
STDLIB_NAMES = frozenset(getattr(sys, "stdlib_module_names", ()))
MAX_CALL_CPU_S = 1e6  # a call's CPU time as the program reports it: finite, positive, below this
MAX_NAME_CHARS = 200  # of an exception class re-created from the program's


class ResultNotPlainData(Exception):
    """A test compared (or tested the truth of) an object that is not plain data."""


class ProgramGone(BaseException):
    """The program process died (``abuse=False``: stop without a verdict, the fork server tells
    why) or broke the protocol (``abuse=True``: the program wrote junk into the channel)."""

    def __init__(self, message: str, abuse: bool = False) -> None:
        super().__init__(message)
        self.abuse = abuse


class Link:
    """The judge's end of the socket pair; counts the program's output and CPU per test.

    One request at a time: :meth:`ask` sends a request and receives its reply before anything else
    is sent, so the program process never holds the arguments of a call that has not been made yet
    (a later test's arguments can be an earlier test's expected value: ``f(1) == 2``, ``f(2) == 4``).
    """

    def __init__(self, channel: Any) -> None:
        self.channel = channel
        self.cpu = 0.0

    def ask(self, request: dict[str, Any]) -> Any:
        """Send ``request`` and return its reply (see :meth:`receive`)."""
        try:
            self.channel.send(json.dumps(request, allow_nan=True).encode("utf-8", "surrogatepass"))
        except ChannelClosed as exc:
            raise ProgramGone(str(exc)) from None
        return self.receive(iteration=request["op"] == "next")

    def receive(self, iteration: bool = False) -> Any:
        """The next reply, rebuilt; whatever the program sent, this raises only ProgramGone (it
        broke the protocol or died), ResultNotPlainData, or the exception the program raised as
        :func:`remote_exception` re-creates it (``iteration``: the reply to a ``next``, where
        StopIteration ends the iteration, as it should)."""
        channel = self.channel
        try:
            reply = json.loads(channel.recv())
        except ChannelAbuse as exc:
            raise ProgramGone(str(exc), abuse=True) from None
        except ChannelClosed as exc:
            raise ProgramGone(str(exc)) from None
        except TimeoutError:
            raise  # the fork server's deadline (.served): the test times out
        except Exception as exc:  # noqa: BLE001 - malformed, nested too deep, too big to decode, ...
            raise ProgramGone(f"malformed reply: {type(exc).__name__}", abuse=True) from None
        if type(reply) is not dict:
            raise ProgramGone("malformed reply", abuse=True)
        tick = getattr(channel, "tick", None)  # (.served: the fork server's deadline, while it decodes)
        if tick is not None:
            tick(True)
        cpu = reply.get("c")
        if type(cpu) is float and 0 < cpu < MAX_CALL_CPU_S:
            self.cpu += cpu
        output = reply.get("o")
        if type(output) is list and len(output) == 4:
            _add_output(sys.stdout, output[0], output[1])
            _add_output(sys.stderr, output[2], output[3])
        if "x" in reply:
            raise remote_exception(reply["x"], iteration)
        try:
            value = self.rebuild(reply.get("r"))
            changed = reply.get("m")
            return value, changed
        except (NotPlainData, RecursionError) as exc:
            raise ResultNotPlainData(f"the program sent something that is not plain data: {exc}") from None

    def rebuild(self, tree: Any, refs: bool = True) -> Any:
        """A value of the program from its tree (``refs``: with references). In the fork server (whose
        channel has ``tick``), keys that collide in ``hash()`` hand the run to a judge process,
        where building them is held to the deadline (raises ProgramGone here)."""
        tick = getattr(self.channel, "tick", None)
        try:
            return from_tree(tree, self._deref if refs else None, 0, tick)
        except HashFlood as exc:
            try:
                self.channel.hand_off(str(exc))
            except ChannelClosed as closed:
                raise ProgramGone(str(closed)) from None
            raise  # pragma: no cover - hand_off always raises

    def _deref(self, tag: str, data: Any) -> Any:
        if tag == "h" and type(data) is int:
            return Remote(self, {"h": data}, None)
        raise NotPlainData(f"unknown tag {tag!r}")


def _add_output(stream: Any, text: Any, total: Any) -> None:
    if isinstance(stream, BoundedText) and type(text) is str and type(total) is int:
        stream.write(text)
        stream.total += min(max(0, total - len(text)), 1 << 62)


def _target_tree(value: Any) -> Any:
    if isinstance(value, Remote):
        return value._sbx_ref
    raise NotPlainData(f"a {type(value).__name__} defined by the test cannot be passed to the program")


class Remote:
    """Something of the program's: a global (by name) or an object it keeps (by reference)."""

    __slots__ = ("_sbx_link", "_sbx_ref", "__name__")

    def __init__(self, link: Link, ref: dict[str, Any], name: str | None) -> None:
        object.__setattr__(self, "_sbx_link", link)
        object.__setattr__(self, "_sbx_ref", ref)
        object.__setattr__(self, "__name__", name or "<object of the program>")

    def _sbx_op(self, op: str, **fields: Any) -> Any:
        value, _changed = self._sbx_link.ask({"op": op, "t": self._sbx_ref, **fields})
        return value

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            request = {"op": "call", "t": self._sbx_ref, "a": to_tree(list(args), _target_tree),
                       "k": to_tree(kwargs, _target_tree)}
        except NotPlainData as exc:
            raise TypeError(f"cannot pass this argument to the program: {exc}") from None
        link = self._sbx_link
        value, changed = link.ask(request)
        if type(changed) is list:
            _apply_changes(args, kwargs, changed, link.rebuild)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        if self._sbx_ref.get("g") in STDLIB_NAMES:
            # A test that reads ``math.isclose`` (``json.loads``...) means the standard module, which it
            # relied on the program to import: a ``math`` of the program's making would get the test's
            # expected values (and decide the comparison). Calling such a global stays the program's.
            raise AttributeError(f"{self.__name__!r} is the program's own, not the standard module: "
                                 f"import the module in the test or its set-up to use {self.__name__}.{name}")
        return self._sbx_op("getattr", n=name)

    def __iter__(self) -> Any:
        iterator = self._sbx_op("iter")
        if not isinstance(iterator, Remote):
            return iter(iterator)
        return _RemoteIterator(iterator)

    def __len__(self) -> int:
        value = self._sbx_op("len")
        if type(value) is not int:
            raise ResultNotPlainData("len() of an object of the program did not give an int")
        return value

    def __getitem__(self, key: Any) -> Any:
        try:
            tree = to_tree(key, _target_tree)
        except NotPlainData as exc:
            raise TypeError(f"cannot pass this key to the program: {exc}") from None
        return self._sbx_op("getitem", k=tree)

    def __str__(self) -> str:
        value = self._sbx_op("str")
        return value if type(value) is str else ""

    def __repr__(self) -> str:
        value = self._sbx_op("repr")
        return value if type(value) is str else ""

    # Comparisons and hashing are the judge's own, by identity (``object``'s): an object of the
    # program is equal to nothing but itself, whatever its class says.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if "g" in self._sbx_ref:  # a function or class of the program: true, as in Python
            return True
        raise ResultNotPlainData(
            f"{self.__name__} is not plain data (builtin types only): the sandbox does not test its "
            "truth, since that would run the program's own __bool__")


class _RemoteIterator:
    def __init__(self, remote: Remote) -> None:
        self._remote = remote

    def __iter__(self) -> _RemoteIterator:
        return self

    def __next__(self) -> Any:
        return self._remote._sbx_op("next")


def _apply_changes(args: tuple[Any, ...], kwargs: dict[str, Any], changed: list[Any], rebuild: Any) -> None:
    """Mirror the program's in-place changes of mutable arguments (``xs.sort()``) on ours
    (``rebuild``: :meth:`Link.rebuild`)."""
    for item in changed:
        if type(item) is not list or len(item) != 2:
            continue
        where, tree = item
        if type(where) is int and 0 <= where < len(args):
            mine = args[where]
        elif type(where) is str and where in kwargs:
            mine = kwargs[where]
        else:
            continue
        try:
            new = rebuild(tree)
        except (NotPlainData, RecursionError):
            continue
        if type(mine) is not type(new) or mine == new:
            continue
        if type(mine) in (list, bytearray):
            mine[:] = new
        else:
            mine.clear()
            mine.update(new)


# What the program raises is re-created as an ordinary exception when, raised in a test, it would
# change the test's control flow rather than fail it: StopIteration ends the iteration of the
# builtin that called the program (``all(map(f, xs))`` is then true), StopAsyncIteration and
# GeneratorExit likewise. They become RuntimeError, as PEP 479 does for a generator.
_CONTROL_FLOW = (StopIteration, StopAsyncIteration, GeneratorExit)


def remote_exception(info: Any, iteration: bool = False) -> BaseException:
    """The program's exception ``[name, builtin base, message, traceback]`` as an exception of
    this process; ``iteration``: raised by ``next`` on the program's iterator (StopIteration stays)."""
    if type(info) is not list or len(info) != 4 or not all(type(x) is str for x in info):
        return ProgramGone("malformed exception", abuse=True)
    name, base_name, message, tb = (x[:MAX_NAME_CHARS] if i == 0 else x[: 1 << 16] for i, x in enumerate(info))
    base = _PRISTINE_BUILTINS.get(base_name)
    if not (isinstance(base, type) and issubclass(base, BaseException)) or base in (ProgramGone,):
        base = Exception
    if issubclass(base, _CONTROL_FLOW) and not (iteration and base is StopIteration):
        message = f"the program raised {base.__name__}: {message}"
        base = RuntimeError
    try:
        klass = type(name if name.isidentifier() else base.__name__, (base,),
                     {"_sbx_traceback": tb, "__module__": "builtins" if name == base_name else "solution"})
        exc = klass(message)
    except TypeError:  # a base that cannot be subclassed or built from one message
        exc = Exception(message)
        exc._sbx_traceback = tb  # type: ignore[attr-defined]
    return exc
