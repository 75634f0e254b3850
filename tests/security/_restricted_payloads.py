"""Escape payloads against the restricted profile: gadgets, CVEs and pyjail techniques.

Every payload tries to read the file named by ``CANARY`` (replaced by a path literal
before the run) or to reach something that would let it (real builtins, a frame, a code
object, a module outside the allowlist, ``object``). Each case says how it must end:

- ``policy``: a compile rejection or a guard violation (the common case);
- ``exception``: an ordinary error that reached nothing (a builtin that is simply absent,
  a module outside the allowlist: ``ModuleNotFoundError``, a standard-library check that
  refuses the input);
- ``ok``: harmless by construction (the result is a string or a value the program built).

Whatever the kind, the canary's content must appear nowhere (value, detail, output).
The source of each group is named in a comment above it.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Expect = Literal["policy", "exception", "ok"]


class Payload(NamedTuple):
    id: str
    code: str
    expect: Expect


P = Payload

# --- issue 10, item 1: gadgets in allow-listed modules (reproduced as reported) ----------
ISSUE_10 = [
    P(
        "update_wrapper-code-onto-capwords",
        "import functools, string\n"
        "def evil(s, sep=None):\n"
        "    return open(CANARY).read()\n"
        "functools.update_wrapper(string.capwords, evil, assigned=('__code__',), updated=())\n"
        "return string.capwords('x')",
        "policy",
    ),
    P(
        "update_wrapper-merges-sdk-globals",
        "import functools\n"
        "def f():\n"
        "    pass\n"
        "functools.update_wrapper(f, parallel, assigned=(), updated=('__globals__',))\n"
        "def g():\n"
        "    return open(CANARY).read()\n"
        "return g()",
        "policy",
    ),
    P(
        "singledispatch-string-annotation-eval",
        "import functools\n"
        'def f(x: "[c for c in ().__class__.__base__.__subclasses__() if c.__name__ == '
        "'catch_warnings'][0]()._module.__builtins__['open'](CANARY).read()\"):\n"
        "    return 1\n"
        "functools.singledispatch(lambda x: 0).register(f)\n"
        "return 'registered'",
        "policy",
    ),
    P(
        "update_wrapper-hands-gi_frame-to-update",
        "import functools, heapq\n"
        "class Grab:\n"
        "    def update(self, value):\n"
        "        self.value = value\n"
        "class W:\n"
        "    pass\n"
        "w, grab = W(), Grab()\n"
        "setattr(w, 'gi' + '_frame', grab)\n"
        "gen = heapq.merge([1], [2])\n"
        "next(gen)\n"
        "functools.update_wrapper(w, gen, assigned=(), updated=('gi' + '_frame',))\n"
        "holder, grab2 = W(), Grab()\n"
        "setattr(holder, 'f' + '_builtins', grab2)\n"
        "functools.update_wrapper(holder, grab.value, assigned=(), updated=('f' + '_builtins',))\n"
        "return grab2.value['open'](CANARY).read()",
        "policy",
    ),
    P(
        "userstring-format-walk",
        "import collections\n"
        "return collections.UserString('{0.__globals__[__builtins__]}').format(parallel)",
        "policy",
    ),
    P(
        "update_wrapper-copies-str-format",
        "import functools\n"
        "class W:\n"
        "    pass\n"
        "w = W()\n"
        "functools.update_wrapper(w, '{0.__globals__[__builtins__]}', assigned=('format',),"
        " updated=())\n"
        "return w.format(parallel)",
        "policy",
    ),
    P("int-mro-reaches-object", "return str(int.mro()[-1])", "policy"),
    P(
        "caught-guard-violation-carries-on",
        "try:\n    getattr((), '__subclasses__')\nexcept BaseException:\n    pass\nreturn 1",
        "policy",
    ),
]

# --- this review: the same classes of gadget found by walking every allow-listed module ---
AUDIT = [
    # functools: program-chosen attribute names, writes into objects the guards protect
    P(
        "wraps-with-assigned-names",
        "import functools\n"
        "def f():\n"
        "    pass\n"
        "return str(functools.wraps(parallel, assigned=('__globals__',))(f))",
        "policy",
    ),
    P(
        "update_wrapper-onto-a-builtin",
        "import functools\ndef f():\n    pass\nfunctools.update_wrapper(len, f)",
        "policy",
    ),
    P(
        "update_wrapper-onto-an-stdlib-function",
        "import functools, json\ndef f():\n    pass\nfunctools.update_wrapper(json.dumps, f)",
        "policy",
    ),
    P(
        "total_ordering-on-a-shared-class",
        "import functools\nfunctools.total_ordering(int)",
        "policy",
    ),
    P(
        "total_ordering-on-counter",
        "import functools, collections\nfunctools.total_ordering(collections.Counter)",
        "policy",
    ),
    P("singledispatch-dropped", "import functools\nfunctools.singledispatch", "policy"),
    P(
        "singledispatchmethod-dropped",
        "from functools import singledispatchmethod",
        "policy",
    ),
    P(
        "partial-of-getattr-is-still-guarded",
        "import functools\nreturn functools.partial(getattr, len)('__self__')",
        "policy",
    ),
    P(
        "reduce-of-getattr-is-still-guarded",
        "import functools\n"
        "return functools.reduce(getattr, ['__globals__', '__builtins__'], parallel)",
        "policy",
    ),
    # classes: attributes supplied by the metaclass (mro, register)
    P("str-mro", "return str.mro()", "policy"),
    P("getattr-int-mro", "return getattr(int, 'mro')()[-1]", "policy"),
    P("counter-mro", "import collections\nreturn collections.Counter.mro()", "policy"),
    P("program-class-mro", "class A:\n    pass\nreturn A.mro()", "policy"),
    P("sdk-class-mro", "return ToolCallError.mro()", "policy"),
    P("abc-register", "import collections\ncollections.UserDict.register(int)", "policy"),
    P("fraction-register", "import fractions\nfractions.Fraction.register(int)", "policy"),
    # format-string walks outside str
    P("userstring-dropped", "from collections import UserString", "policy"),
    P(
        "format-map-through-map",
        "return list(map(str.format, ['{0.__class__.__base__.__subclasses__}'], [1]))",
        "policy",
    ),
    P(
        "str-subclass-format",
        "class S(str):\n    pass\nreturn S('{0.__init__.__globals__}').format(parallel)",
        "policy",
    ),
    P(
        "formatter-vformat",
        "import string\nreturn string.Formatter().vformat('{0.__class__}', [1], {})",
        "policy",
    ),
    P(
        "template-is-item-lookup-only",
        "import string\nreturn string.Template('$x and ${y}').substitute({'x': 1, 'y': parallel})",
        "ok",
    ),
    P(
        "template-subclass-pattern-is-item-lookup-only",
        "import string\n"
        "class T(string.Template):\n"
        "    delimiter = '#'\n"
        "return T('#x').safe_substitute({'x': 2})",
        "ok",
    ),
    P("percent-mapping-is-item-lookup-only", "return '%(a)s' % {'a': 1}", "ok"),
    # modules reachable from allowed modules (sys._getframe, codecs.open, operator.attrgetter)
    P("statistics-sys-getframe", "import statistics\nreturn statistics.sys", "policy"),
    P("datetime-sys-modules", "import datetime\nreturn datetime.sys.modules['os']", "policy"),
    P("datetime-capi-capsule", "import datetime\nreturn datetime.datetime_CAPI", "policy"),
    P("fractions-operator-attrgetter", "import fractions\nreturn fractions.operator", "policy"),
    P("fractions-sys", "from fractions import sys", "policy"),
    P("textwrap-re-module", "import textwrap\nreturn textwrap.re", "policy"),
    P("re-functools-update_wrapper", "import re\nreturn re.functools", "policy"),
    P("re-copyreg", "import re\nreturn re.copyreg", "policy"),
    P("json-decoder-module", "import json\nreturn json.decoder", "policy"),
    P("json-codecs-open", "import json\nreturn json.codecs.open(CANARY).read()", "policy"),
    P("collections-abc-module", "import collections\nreturn collections.abc", "policy"),
    P("functools-rlock", "import functools\nreturn functools.RLock", "policy"),
    P("decimal-default-context", "import decimal\nreturn decimal.DefaultContext", "policy"),
    P("hasattr-is-guarded-too", "import json\nreturn hasattr(json, 'codecs')", "policy"),
    # generators from the standard library: frames
    P(
        "heapq-merge-gi_frame",
        "import heapq\nreturn getattr(heapq.merge([1], [2]), 'gi' + '_frame')",
        "policy",
    ),
    P(
        "json-iterencode-gi_yieldfrom",
        "import json\n"
        "g = json.JSONEncoder().iterencode({'a': [1]})\n"
        "next(g)\n"
        "return getattr(g, 'gi' + '_yieldfrom')",
        "policy",
    ),
    # hooks and callbacks: they receive data, never internals
    P(
        "json-object_pairs_hook-getattr",
        "import json, functools\n"
        "return json.loads('{\"a\": 1}', object_pairs_hook=functools.partial(getattr, ()))",
        "exception",  # getattr((), [...]): CPython's TypeError, a name must be a str
    ),
    P(
        "json-cls-program-decoder",
        "import json\n"
        "class D(json.JSONDecoder):\n"
        "    def decode(self, s):\n"
        "        return ['decoded', s]\n"
        "return json.loads('1', cls=D)",
        "ok",
    ),
    P(
        "re-sub-callback-gets-a-match",
        "import re\nreturn re.sub('a', lambda m: m.group(0).upper(), 'banana')",
        "ok",
    ),
    P(
        "random-subclass",
        "import random\n"
        "class R(random.Random):\n"
        "    def random(self):\n"
        "        return 0.0\n"
        "return R().choice(['first', 'second'])",
        "ok",
    ),
    # namedtuple evals a lambda built from the field names: they must be identifiers
    P(
        "namedtuple-field-injection",
        "import collections\nreturn collections.namedtuple('P', ['a=len): 0 #'])",
        "exception",
    ),
    P(
        "namedtuple-typename-injection",
        "import collections\nreturn collections.namedtuple('P(x): pass\\n#', ['a'])",
        "exception",
    ),
    P(
        "namedtuple-dunder-field",
        "import collections\nreturn collections.namedtuple('P', ['__globals__'])",
        "exception",
    ),
    # AttributeError.obj hands over the object a lookup failed on (CVE-2024-47532's shape)
    P(
        "attributeerror-obj",
        "import string\ntry:\n    string.nothing_here\nexcept AttributeError as e:\n"
        "    return e.obj",
        "policy",
    ),
    P(
        "attributeerror-obj-from-library-code",
        "import json\n"
        "class F:\n"
        "    pass\n"
        "try:\n"
        "    json.dump([1], F())\n"
        "except AttributeError as e:\n"
        "    return getattr(e, 'obj')",
        "policy",
    ),
    # writes into shared objects
    P("write-module-proxy", "import json\njson.dumps = len", "policy"),
    P("setattr-class", "import datetime\nsetattr(datetime.datetime, 'now', len)", "policy"),
    P("write-counter-class", "import collections\ncollections.Counter.most_common = len", "policy"),
    P("write-sdk-object", "tools.echo = len", "policy"),
    P("write-program-function", "def f():\n    pass\nf.x = 1", "policy"),
    P("delattr-module", "import math\ndelattr(math, 'pi')", "policy"),
    # the SDK's own objects are Python functions with real builtins
    P("sdk-globals-getattr", "return getattr(parallel, '__globals__')", "policy"),
    P(
        "sdk-tool-attribute-walk",
        "return getattr(getattr(tools.echo, '__init__'), '__globals__')",
        "policy",
    ),
    P("sdk-transport-name", "return __transport__", "policy"),
]

# --- RestrictedPython advisories and their regression tests -------------------------------
# CVE-2023-37271 (generator gi_frame / f_back): RestrictedPython tests/transformer/test_inspect.py
# and tests/test_Guards.py SAFER_GETATTR_BREAKOUT2
RESTRICTEDPYTHON = [
    P(
        "cve-2023-37271-gi_frame-attribute",
        "generator = (statement.gi_frame for statement in (1,))\n"
        "return [elem for elem in generator][0]",
        "policy",
    ),
    P(
        "cve-2023-37271-f_back-chain",
        "g = None\nframe = None\n"
        "def test():\n"
        "    global g, frame\n"
        "    frame = g.gi_frame.f_back.f_back\n"
        "    yield frame\n"
        "g = test()\n"
        "g.send(None)\n"
        "return frame.f_builtins.get('open')(CANARY).read()",
        "policy",
    ),
    P(
        "cve-2023-37271-getattr-strings",
        "box = []\n"
        "def test():\n"
        "    leak = getattr(getattr(getattr(box[0], 'gi_frame'), 'f_back'), 'f_back')\n"
        "    box.append(leak)\n"
        "    yield leak\n"
        "box.append(test())\n"
        "box[0].send(None)\n"
        "return getattr(box[1], 'f_builtins').get('open')(CANARY).read()",
        "policy",
    ),
    P(
        "cve-2023-37271-gi_code",
        "def g():\n    yield 1\nreturn getattr(g(), 'gi' + '_code')",
        "policy",
    ),
    # SAFER_GETATTR_BREAKOUT: a str subclass whose startswith lies (tests/test_Guards.py)
    P(
        "fake-string-attribute-name",
        "class FakeString(str):\n"
        "    def startswith(self, prefix):\n"
        "        return False\n"
        "return getattr((), FakeString('__class__'))",
        "policy",
    ),
    # CVE-2023-41039 (format strings): tests/test_Guards.py STRING_DOT_FORMAT_*
    # Plain fields are CPython's format; a field that walks goes through the guards.
    P("cve-2023-41039-str-format", "a = 'Hello {}'\nreturn a.format('world')", "ok"),
    P(
        "cve-2023-41039-field-walks-into-globals",
        "return '{0.__globals__[__builtins__]}'.format(parallel)",
        "policy",
    ),
    P(
        "cve-2023-41039-nested-spec-walks",
        "return '{0:{1.__init__.__globals__}}'.format(1, parallel)",
        "policy",
    ),
    P(
        "cve-2023-41039-format_map",
        "a = 'Hello {foo.__dict__}'\nreturn a.format_map({'foo': str})",
        "policy",
    ),
    P(
        "cve-2023-41039-unbound-str-format",
        "return str.format('{0.__class__.__mro__[1]}', int)",
        "policy",
    ),
    P(
        "cve-2023-41039-unbound-format_map",
        "return str.format_map('Hello {foo.__dict__}', {'foo': str})",
        "policy",
    ),
    P(
        "cve-2023-41039-string-formatter",
        "import string\nreturn string.Formatter().format('{0.__class__}', 1)",
        "policy",
    ),
    P(
        "cve-2023-41039-formatter-get_field",
        "import string\nreturn string.Formatter().get_field('0.__class__', [1], {})",
        "policy",
    ),
    # CVE-2024-47532 (AttributeError.obj and the string module): tests/builtins/test_utilities.py
    P(
        "cve-2024-47532-attributeerror-obj-string",
        "import string\n"
        "try:\n"
        "    string.unexisting_attribute\n"
        "except AttributeError as e:\n"
        "    return getattr(e.obj, 'Formatter')",
        "policy",
    ),
    # CVE-2025-22153 (try/except* type confusion): tests/transformer/test_try.py
    P(
        "cve-2025-22153-except-star",
        "try:\n    raise ExceptionGroup('group', [ValueError(65)])\nexcept* ValueError:\n    pass",
        "policy",
    ),
    P(
        "cve-2025-22153-exceptiongroup-builtin",  # a builtin now; except* stays refused
        "try:\n    raise ExceptionGroup('g', [ValueError()])\nexcept* ValueError:\n    pass",
        "policy",
    ),
    # RestrictedPython 8.3: positional-only parameters shadowing a guard (CHANGES.rst)
    P(
        "positional-only-shadows-_getattr_",
        "def f(_getattr_, /):\n    return getattr(parallel, '__globals__')\nreturn f(getattr)",
        "policy",
    ),
    P(
        "positional-only-shadows-_write_",
        "import json\ndef f(_write_, /):\n    json.dumps = len\nf(lambda x: x)",
        "policy",
    ),
    P("lambda-positional-only-shadow", "f = lambda _getitem_, /: 1\nreturn f(1)", "policy"),
]

# --- pyjail techniques: salvatore-abello/python-ctf-cheatsheet, pyjails/README.md ----------
PYJAIL = [
    # "Restore builtins"
    P("len-self", "return len.__self__", "policy"),
    P("getattr-len-self", "return getattr(len, '__self__')", "policy"),
    P("getattr-getattr-self", "return getattr(getattr, '__self__')", "policy"),
    P("build_class-self", "return __build_class__.__self__", "policy"),
    P("import-self", "return __import__.__self__", "policy"),
    P("help-call-builtins", "return help.__call__.__builtins__", "policy"),
    P("license-repr-globals", "return license.__repr__.__globals__['sys']", "policy"),
    P("help-builtin-absent", "return help()", "exception"),
    P("license-builtin-absent", "return license()", "exception"),
    P("credits-builtin-absent", "return credits", "exception"),
    P("function-builtins", "def f():\n    pass\nreturn f.__builtins__", "policy"),
    P("function-globals-getattr", "def f():\n    pass\nreturn getattr(f, '__globals__')", "policy"),
    P("lambda-globals", "return (lambda: 0).__globals__", "policy"),
    # "Spawning a shell" / "Read a file"
    P("breakpoint", "breakpoint()", "policy"),
    P("exec-input", "exec(input())", "policy"),
    P("eval-input", "eval(input())", "policy"),
    P("help-open", "help(*open(CANARY))", "exception"),
    P("exit-open", "exit(*open(CANARY))", "exception"),
    P("print-open", "print(*open(CANARY))", "exception"),
    P("compile-filename-leak", "compile('.', CANARY, 'exec')", "exception"),
    P("globals-call", "return globals()", "exception"),
    P("vars-call", "return vars()", "exception"),
    # "Deleting a variable" / "no builtins"
    P("del-builtins", "del __builtins__", "policy"),
    # "No function calls": decorators applied to builtins
    P("decorator-exec-input", "@exec\n@input\ndef a():\n    pass", "exception"),
    P(
        "decorator-print-set-open-input",
        "@print\n@set\n@open\n@input\ndef a():\n    pass",
        "exception",
    ),
    P(
        "decorator-getattr-on-class",
        "@getattr\nclass A:\n    pass",
        "exception",
    ),
    # "No ASCII letters": identifiers are NFKC-normalised before the policy sees them
    P(
        "unicode-breakpoint",
        "\U0001d623\U0001d633\U0001d626\U0001d622\U0001d62c\U0001d631"
        "\U0001d630\U0001d62a\U0001d62f\U0001d635()",
        "policy",
    ),
    P(
        "unicode-import",
        "_\uff3f\U0001d62a\U0001d62e\U0001d631\U0001d630\U0001d633\U0001d635\uff3f_('os')",
        "policy",
    ),
    P(
        "unicode-class-mro-subclasses",
        "return ()._\uff3f\U0001d624\U0001d62d\U0001d622\U0001d634\U0001d634\uff3f_"
        "._\uff3f\U0001d623\U0001d622\U0001d634\U0001d626\uff3f_",
        "policy",
    ),
    # "no builtins, no mro": the type.__subclasses__ walk to ABCMeta.register
    P(
        "type-subclasses-register",
        "return ().__class__.__class__.__subclasses__(().__class__.__class__)[0]"
        ".register.__builtins__['open'](CANARY).read()",
        "policy",
    ),
    P(
        "subclasses-walk",
        "return [c for c in ().__class__.__base__.__subclasses__() "
        "if c.__name__ == 'catch_warnings'][0]()._module.__builtins__['open'](CANARY).read()",
        "policy",
    ),
    P(
        "subclasses-walk-getattr-strings",
        "o = getattr(getattr((), '__cl' + 'ass__'), '__ba' + 'se__')\n"
        "return getattr(o, '__subcl' + 'asses__')()",
        "policy",
    ),
    P("os-wrap-close-globals", "return ().__class__.__mro__[1].__subclasses__()", "policy"),
    # "Bypass blacklists using generators / asynchronous functions"
    P("generator-gi_frame-f_builtins", "return (x for x in ()).gi_frame.f_builtins", "policy"),
    P(
        "generator-gi_frame-getattr",
        "return getattr(getattr((x for x in ()), 'gi_frame'), 'f_globals')",
        "policy",
    ),
    P("async-cr_frame", "async def a():\n    pass\nreturn a().cr_frame.f_globals", "policy"),
    # "Other ways to obtain a frame": signal handlers (and sys) through a module
    P("signal-frame", "import signal\nreturn signal", "exception"),
    P("sys-getframe", "import sys\nreturn sys._getframe(0)", "policy"),
    P(
        "collections-sys-getframe",
        "import collections\nreturn getattr(collections, '_sys')",
        "policy",
    ),
    # "No (), inside eval": __class_getitem__ assignment
    P(
        "class_getitem-exec",
        "class A:\n    pass\nreturn [[None for A.__class_getitem__ in [len]], A['x']][1]",
        "policy",
    ),
    # "Bypass audit sandboxes" / "OOB read": loaders and code objects
    P("builtins-loader", "return __builtins__.__loader__.load_module('posix')", "policy"),
    P(
        "code-replace",
        "return (lambda: 0).__code__.replace(co_code=b'')",
        "policy",
    ),
    # "Other useful things"
    P(
        "closure",
        "def f():\n    x = 1\n    def g():\n        return x\n    return g\nreturn f().__closure__",
        "policy",
    ),
    P(
        "reduce_ex",
        "class A:\n    pass\nreturn getattr(A(), '__reduce' + '_ex__')(2)",
        "policy",
    ),
    P(
        "traceback-tb_frame",
        "try:\n    1 / 0\nexcept Exception as e:\n    return e.__traceback__.tb_frame",
        "policy",
    ),
    P(
        "traceback-getattr",
        "try:\n    1 / 0\nexcept Exception as e:\n    return getattr(e, '__trace' + 'back__')",
        "policy",
    ),
    P("metaclass-keyword", "class A(metaclass=len):\n    pass", "policy"),
    P("import-os", "import os\nreturn os.listdir('/')", "exception"),
    P("from-import-dunder", "from json import __builtins__", "policy"),
    P("import-star", "from json import *", "policy"),
    P("open-builtin", "return open(CANARY).read()", "exception"),
]

# --- issue 23: the widened profile (special methods, dunder reads, augmented writes, _names,
# more builtins and modules, async) attacked where it widened ----------------------------
ISSUE_23 = [
    # special methods a class may define never include the hooks that run with power
    P(
        "define-getattribute",
        "class G:\n    def __getattribute__(self, n):\n        pass",
        "policy",
    ),
    P("define-del", "class D:\n    def __del__(self):\n        pass", "policy"),
    P(
        "define-reduce-for-copy",
        "import copy\n"
        "class R:\n    def __reduce_ex__(self, p):\n        return (open, (CANARY,))\n"
        "return copy.deepcopy(R()).read()",
        "policy",
    ),
    P("define-init-subclass", "class P:\n    def __init_subclass__(cls):\n        pass", "policy"),
    P(
        "define-class-getitem",
        "class C:\n    def __class_getitem__(cls, k):\n        pass",
        "policy",
    ),
    P("bind-builtins-name", "__builtins__ = {}\nreturn open(CANARY).read()", "policy"),
    P("bind-metaclass-name", "__metaclass__ = type\nclass A:\n    pass", "policy"),
    P(
        "getattr-hook-does-not-bypass-the-guard",
        "class E:\n    def __getattr__(self, n):\n        return n\n"
        "return getattr(E(), '__globals__')",
        "policy",
    ),
    P(
        "special-method-onto-a-library-class",
        "import json\njson.JSONDecoder.__eq__ = lambda a, b: True",
        "policy",
    ),
    P("special-method-onto-int", "int.__add__ = lambda a, b: 0", "policy"),
    P(
        "setattr-of-a-dunder",
        "class A:\n    pass\nsetattr(A, '__reduce_ex__', lambda s, p: (open, (CANARY,)))",
        "policy",
    ),
    P(
        "type-namespace-getattribute",
        "X = type('X', (), {'__getattribute__': lambda s, n: 1})",
        "policy",
    ),
    P(
        "type-namespace-reduce-for-copy",
        "import copy\nX = type('X', (), {'__reduce_ex__': lambda s, p: (open, (CANARY,))})\n"
        "return copy.copy(X()).read()",
        "policy",
    ),
    # a real metaclass never reaches the program: it would build classes no policy saw
    P(
        "real-type-through-class-of-a-class",
        "T = ().__class__.__class__\n"
        "X = T('X', (), {'__reduce_ex__': lambda s, p: (open, (CANARY,))})\n"
        "import copy\nreturn copy.copy(X()).read()",
        "policy",
    ),
    P(
        "real-type-through-type-of-a-class",
        "T = type(type(1))\nX = T('X', (), {'__del__': lambda s: None})",
        "policy",
    ),
    P(
        "real-type-through-typing-origin",
        "import typing\nT = typing.get_origin(typing.Type[int])\n"
        "X = T('X', (), {'__getattribute__': lambda s, n: 1})",
        "policy",
    ),
    P(
        "program-metaclass-through-class",
        "class A:\n    pass\nM = A.__class__\nX = M('X', (), {'__del__': lambda s: None})",
        "policy",
    ),
    # dunder reads: the metadata and special methods, nothing that walks on
    P("class-base-walk", "return (1).__class__.__base__.__subclasses__()", "policy"),
    P("class-mro-walk", "return int.__mro__[-1].__subclasses__()", "policy"),
    P("class-dict", "return int.__dict__", "policy"),
    P("builtin-self-module", "return len.__self__.open(CANARY).read()", "policy"),
    P("method-wrapper-globals", "def f():\n    pass\nreturn f.__init__.__globals__", "policy"),
    P(
        "function-globals-via-annotations",
        "def f(x: int):\n    pass\nreturn f.__annotations__['x'].__init__.__globals__",
        "policy",
    ),
    P("object-subclasses", "return object.__subclasses__()", "policy"),
    P(
        "unbound-object-setattr-on-a-module",
        "import json\nobject.__setattr__(json, 'dumps', len)",
        "policy",
    ),
    P(
        "unbound-dict-setitem-on-a-view",
        "import json\nreturn dict.__setitem__(json.__dict__, 'x', 1)",
        "policy",
    ),
    P("super-setattr-on-an-int", "return super(int, 1).__setattr__('real', 2)", "policy"),
    P(
        "object-setattr-dunder-on-own-instance",
        "class A:\n    pass\na = A()\nobject.__setattr__(a, '__class__', int)",
        "policy",
    ),
    P("getattr-hook-of-an-alias", "import typing\nreturn typing.List.__getattr__('x')", "policy"),
    P(
        "await-dunder-steps-a-coroutine",
        "async def f():\n    pass\n"
        "c = f()\ntry:\n    return c.__await__()\nfinally:\n    c.close()",
        "policy",
    ),
    P(
        "coroutine-send-hands-out-a-future",
        "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n"
        "c = f()\ntry:\n    return c.send(None).get_loop()\nfinally:\n    c.close()",
        "policy",
    ),
    P(
        "gather-future-get-loop",
        "import asyncio\nasync def main():\n    g = asyncio.gather()\n"
        "    return g.get_loop().subprocess_shell\nreturn await main()",
        "policy",
    ),
    P(
        "async-generator-asend-steps",
        "async def g():\n    yield 1\nreturn g().asend(None).send(None)",
        "policy",
    ),
    P("asyncio-loop-dropped", "import asyncio\nreturn asyncio.get_event_loop()", "policy"),
    P(
        "asyncio-subprocess-dropped",
        "import asyncio\nreturn asyncio.create_subprocess_shell('cat ' + CANARY)",
        "policy",
    ),
    # private names: the program's own objects only, never a library's internals
    P("private-of-a-module", "import random\nreturn random._inst", "policy"),
    P("private-of-a-library-object", "import re\nreturn re.compile('x')._x", "policy"),
    P(
        "private-inherited-from-a-library-base",
        "import random\nclass R(random.Random):\n    pass\nreturn R()._randbelow(5)",
        "policy",
    ),
    P(
        "private-write-onto-a-library-object",
        "import decimal\nc = decimal.Context()\nc._x = 1",
        "policy",
    ),
    P("reserved-guard-name", "_getattr_ = getattr", "policy"),
    P("reserved-print-collector", "_print = 1", "policy"),
    P(
        "private-name-mangling-stays-own",
        "class A:\n    def __init__(self):\n        self.__secret = 1\n"
        "    def get(self):\n        return self.__secret\nreturn [A().get(), A()._A__secret]",
        "ok",
    ),
    # augmented writes go through the write guard
    P("augmented-write-into-a-module", "import math\nmath.pi += 1", "policy"),
    P(
        "augmented-write-into-a-class",
        "import json\njson.JSONEncoder.item_separator += 'x'",
        "policy",
    ),
    P("augmented-write-a-dunder", "class A:\n    pass\nA.__doc__ += 'x'", "policy"),
    P("augmented-item-of-a-mappingproxy", "import json\ntype(json).__dict__['x'] += 1", "policy"),
    P(
        "augmented-writes-on-own-objects",
        "class A:\n    n = 0\na = A()\na.n += 2\nd = {'k': 1}\nd['k'] += 1\nreturn [a.n, d]",
        "ok",
    ),
    # format strings walk through the guards now
    P("format-field-globals", "return '{0.__globals__}'.format(parallel)", "policy"),
    P("format-field-self", "return '{0.__self__.open}'.format(len)", "policy"),
    P("format-field-index-of-a-walk", "return '{0.__init__[0]}'.format(parallel)", "exception"),
    # the new modules' surfaces
    P("sys-modules", "import sys\nreturn sys.modules['os']", "policy"),
    P(
        "sys-exc-info-frame",
        "import sys\ntry:\n    1 / 0\nexcept Exception:\n"
        "    t = sys.exc_info()[2]\nreturn t.tb_frame",
        "policy",
    ),
    P("sys-stdout-is-the-runs", "import sys\nreturn sys.stdout.buffer", "exception"),
    P("sys-setrecursionlimit", "import sys\nsys.setrecursionlimit(10)", "policy"),
    P("typing-get-type-hints", "import typing\nreturn typing.get_type_hints", "policy"),
    P(
        "typing-forwardref-evaluate",
        'import typing\nf = typing.List["open(CANARY).read()"].__args__[0]\n'
        "return f._evaluate(globals(), None, frozenset())",
        "policy",
    ),
    P(
        "typing-alias-setattr-forwards",
        "import typing\ntyping.List.copy = len",
        "policy",
    ),
    P("typing-final-marks", "import typing\nimport json\ntyping.final(json.dumps)", "policy"),
    P(
        "dataclass-field-name-injection",
        "import dataclasses\nclass A:\n    x: int\n"
        'A.__annotations__["y=open(CANARY).read()"] = int\nreturn dataclasses.dataclass(A)',
        "policy",
    ),
    P(
        "dataclass-of-a-library-class",
        "import dataclasses, json\ndataclasses.dataclass(json.JSONEncoder)",
        "policy",
    ),
    P("make-dataclass-dropped", "import dataclasses\nreturn dataclasses.make_dataclass", "policy"),
    P("copy-dispatch-table", "import copy\nreturn copy.dispatch_table", "policy"),
    P("base64-main-reads-argv", "import base64\nreturn base64.main", "policy"),
    P("time-tzset", "import time\ntime.tzset()", "policy"),
    P("queue-threading", "import queue\nreturn queue.threading", "policy"),
    P("future-module", "import __future__", "policy"),
    # with `from __future__ import annotations` an annotation is text nothing evaluates
    P(
        "lazy-annotation-in-a-namedtuple",
        "from __future__ import annotations\nimport typing\n"
        "class A(typing.NamedTuple):\n    x: open(CANARY).read()\n"
        "return type(A.__annotations__['x']).__name__",
        "ok",
    ),
    P(
        "lazy-annotation-in-a-dataclass",
        "from __future__ import annotations\nimport dataclasses\n"
        "@dataclasses.dataclass\nclass A:\n    x: __builtins__['open'](CANARY).read() = 1\n"
        "return A().x",
        "ok",
    ),
    # CPython's errors name no internals of the runtime
    P("apply-is-gone", "return list(**1)", "exception"),
    P("unpack-an-endless-iterator", "import itertools\na, b = itertools.count()", "exception"),
]

ALL: list[Payload] = [*ISSUE_10, *AUDIT, *RESTRICTEDPYTHON, *PYJAIL, *ISSUE_23]
"""Every payload; ids are unique."""
