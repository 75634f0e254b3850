"""Reviewed public attributes of every class a restricted program can name.

Checked by ``test_restricted_surface``: exposed classes, the builtin types of the
program's builtins table, and (``values.``) the types of values a program gets without
being able to name their class. Each entry was read for the gadgets the profile guards
against: methods that take attribute names, format strings or source code, or hand out
frames, code, globals, builtins or modules. Found: ``str.format``/``format_map``,
``AttributeError.obj``, ``gi_frame``/``gi_code``/``gi_yieldfrom`` (refused by name) and the
metaclass methods ``mro``/``register`` (refused on every class). A new attribute fails
the test until someone reads it and adds it here.
"""

from __future__ import annotations

SURFACE: dict[str, str] = {
    "builtins.ArithmeticError": "add_note args with_traceback",
    "builtins.AssertionError": "add_note args with_traceback",
    "builtins.AttributeError": "add_note args name obj with_traceback",
    "builtins.BaseException": "add_note args with_traceback",
    "builtins.BufferError": "add_note args with_traceback",
    "builtins.BytesWarning": "add_note args with_traceback",
    "builtins.DeprecationWarning": "add_note args with_traceback",
    "builtins.EOFError": "add_note args with_traceback",
    "builtins.EnvironmentError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.Exception": "add_note args with_traceback",
    "builtins.FloatingPointError": "add_note args with_traceback",
    "builtins.FutureWarning": "add_note args with_traceback",
    "builtins.GeneratorExit": "add_note args with_traceback",
    "builtins.IOError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ImportError": "add_note args msg name path with_traceback",
    "builtins.ImportWarning": "add_note args with_traceback",
    "builtins.IndentationError": (
        "add_note args end_lineno end_offset filename lineno msg offset "
        "print_file_and_line text with_traceback"
    ),
    "builtins.IndexError": "add_note args with_traceback",
    "builtins.KeyError": "add_note args with_traceback",
    "builtins.KeyboardInterrupt": "add_note args with_traceback",
    "builtins.LookupError": "add_note args with_traceback",
    "builtins.MemoryError": "add_note args with_traceback",
    "builtins.NameError": "add_note args name with_traceback",
    "builtins.NotImplementedError": "add_note args with_traceback",
    "builtins.OSError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.OverflowError": "add_note args with_traceback",
    "builtins.PendingDeprecationWarning": "add_note args with_traceback",
    "builtins.ReferenceError": "add_note args with_traceback",
    "builtins.RuntimeError": "add_note args with_traceback",
    "builtins.RuntimeWarning": "add_note args with_traceback",
    "builtins.StopIteration": "add_note args value with_traceback",
    "builtins.SyntaxError": (
        "add_note args end_lineno end_offset filename lineno msg offset "
        "print_file_and_line text with_traceback"
    ),
    "builtins.SyntaxWarning": "add_note args with_traceback",
    "builtins.SystemError": "add_note args with_traceback",
    "builtins.SystemExit": "add_note args code with_traceback",
    "builtins.TabError": (
        "add_note args end_lineno end_offset filename lineno msg offset "
        "print_file_and_line text with_traceback"
    ),
    "builtins.TypeError": "add_note args with_traceback",
    "builtins.UnboundLocalError": "add_note args name with_traceback",
    "builtins.UnicodeDecodeError": "add_note args encoding end object reason start with_traceback",
    "builtins.UnicodeEncodeError": "add_note args encoding end object reason start with_traceback",
    "builtins.UnicodeError": "add_note args with_traceback",
    "builtins.UnicodeTranslateError": (
        "add_note args encoding end object reason start with_traceback"
    ),
    "builtins.UnicodeWarning": "add_note args with_traceback",
    "builtins.UserWarning": "add_note args with_traceback",
    "builtins.ValueError": "add_note args with_traceback",
    "builtins.Warning": "add_note args with_traceback",
    "builtins.ZeroDivisionError": "add_note args with_traceback",
    "builtins.bool": (
        "as_integer_ratio bit_count bit_length conjugate denominator from_bytes "
        "imag numerator real to_bytes"
    ),
    "builtins.complex": "conjugate imag real",
    "builtins.dict": "clear copy fromkeys get items keys pop popitem setdefault update values",
    "builtins.enumerate": "",
    "builtins.filter": "",
    "builtins.float": "as_integer_ratio conjugate fromhex hex imag is_integer real",
    "builtins.frozenset": (
        "copy difference intersection isdisjoint issubset issuperset "
        "symmetric_difference union"
    ),
    "builtins.int": (
        "as_integer_ratio bit_count bit_length conjugate denominator from_bytes "
        "imag numerator real to_bytes"
    ),
    "builtins.list": "append clear copy count extend index insert pop remove reverse sort",
    "builtins.map": "",
    "builtins.range": "count index start step stop",
    "builtins.reversed": "",
    "builtins.set": (
        "add clear copy difference difference_update discard intersection "
        "intersection_update isdisjoint issubset issuperset pop remove "
        "symmetric_difference symmetric_difference_update union update"
    ),
    "builtins.slice": "indices start step stop",
    "builtins.str": (
        "capitalize casefold center count encode endswith expandtabs find format "
        "format_map index isalnum isalpha isascii isdecimal isdigit isidentifier "
        "islower isnumeric isprintable isspace istitle isupper join ljust lower "
        "lstrip maketrans partition removeprefix removesuffix replace rfind "
        "rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
        "swapcase title translate upper zfill"
    ),
    "builtins.tuple": "count index",
    "builtins.zip": "",
    "collections.ChainMap": (
        "clear copy fromkeys get items keys new_child parents pop popitem "
        "setdefault update values"
    ),
    "collections.Counter": (
        "clear copy elements fromkeys get items keys most_common pop popitem "
        "setdefault subtract total update values"
    ),
    "collections.OrderedDict": (
        "clear copy fromkeys get items keys move_to_end pop popitem setdefault "
        "update values"
    ),
    "collections.UserDict": (
        "clear copy fromkeys get items keys pop popitem setdefault update values"
    ),
    "collections.UserList": "append clear copy count extend index insert pop remove reverse sort",
    "collections.defaultdict": (
        "clear copy default_factory fromkeys get items keys pop popitem "
        "setdefault update values"
    ),
    "collections.deque": (
        "append appendleft clear copy count extend extendleft index insert maxlen "
        "pop popleft remove reverse rotate"
    ),
    "datetime.date": (
        "ctime day fromisocalendar fromisoformat fromordinal fromtimestamp "
        "isocalendar isoformat isoweekday max min month replace resolution "
        "strftime timetuple today toordinal weekday year"
    ),
    "datetime.datetime": (
        "astimezone combine ctime date day dst fold fromisocalendar fromisoformat "
        "fromordinal fromtimestamp hour isocalendar isoformat isoweekday max "
        "microsecond min minute month now replace resolution second strftime "
        "strptime time timestamp timetuple timetz today toordinal tzinfo tzname "
        "utcfromtimestamp utcnow utcoffset utctimetuple weekday year"
    ),
    "datetime.time": (
        "dst fold fromisoformat hour isoformat max microsecond min minute replace "
        "resolution second strftime tzinfo tzname utcoffset"
    ),
    "datetime.timedelta": "days max microseconds min resolution seconds total_seconds",
    "datetime.timezone": "dst fromutc max min tzname utc utcoffset",
    "datetime.tzinfo": "dst fromutc tzname utcoffset",
    "decimal.Clamped": "add_note args with_traceback",
    "decimal.Context": (
        "Emax Emin Etiny Etop abs add canonical capitals clamp clear_flags "
        "clear_traps compare compare_signal compare_total compare_total_mag copy "
        "copy_abs copy_decimal copy_negate copy_sign create_decimal "
        "create_decimal_from_float divide divide_int divmod exp fma is_canonical "
        "is_finite is_infinite is_nan is_normal is_qnan is_signed is_snan "
        "is_subnormal is_zero ln log10 logb logical_and logical_invert logical_or "
        "logical_xor max max_mag min min_mag minus multiply next_minus next_plus "
        "next_toward normalize number_class plus power prec quantize radix "
        "remainder remainder_near rotate rounding same_quantum scaleb shift sqrt "
        "subtract to_eng_string to_integral to_integral_exact to_integral_value "
        "to_sci_string"
    ),
    "decimal.ConversionSyntax": "add_note args with_traceback",
    "decimal.Decimal": (
        "adjusted as_integer_ratio as_tuple canonical compare compare_signal "
        "compare_total compare_total_mag conjugate copy_abs copy_negate copy_sign "
        "exp fma from_float imag is_canonical is_finite is_infinite is_nan "
        "is_normal is_qnan is_signed is_snan is_subnormal is_zero ln log10 logb "
        "logical_and logical_invert logical_or logical_xor max max_mag min "
        "min_mag next_minus next_plus next_toward normalize number_class quantize "
        "radix real remainder_near rotate same_quantum scaleb shift sqrt "
        "to_eng_string to_integral to_integral_exact to_integral_value"
    ),
    "decimal.DecimalException": "add_note args with_traceback",
    "decimal.DecimalTuple": "count digits exponent index sign",
    "decimal.DivisionByZero": "add_note args with_traceback",
    "decimal.DivisionImpossible": "add_note args with_traceback",
    "decimal.DivisionUndefined": "add_note args with_traceback",
    "decimal.FloatOperation": "add_note args with_traceback",
    "decimal.Inexact": "add_note args with_traceback",
    "decimal.InvalidContext": "add_note args with_traceback",
    "decimal.InvalidOperation": "add_note args with_traceback",
    "decimal.Overflow": "add_note args with_traceback",
    "decimal.Rounded": "add_note args with_traceback",
    "decimal.Subnormal": "add_note args with_traceback",
    "decimal.Underflow": "add_note args with_traceback",
    "fractions.Fraction": (
        "as_integer_ratio conjugate denominator from_decimal from_float imag "
        "limit_denominator numerator real"
    ),
    "functools.cached_property": "",
    "functools.partial": "args func keywords",
    "itertools.accumulate": "",
    "itertools.chain": "from_iterable",
    "itertools.combinations": "",
    "itertools.combinations_with_replacement": "",
    "itertools.compress": "",
    "itertools.count": "",
    "itertools.cycle": "",
    "itertools.dropwhile": "",
    "itertools.filterfalse": "",
    "itertools.groupby": "",
    "itertools.islice": "",
    "itertools.pairwise": "",
    "itertools.permutations": "",
    "itertools.product": "",
    "itertools.repeat": "",
    "itertools.starmap": "",
    "itertools.takewhile": "",
    "itertools.zip_longest": "",
    "json.JSONDecodeError": "add_note args with_traceback",
    "json.JSONDecoder": "decode raw_decode",
    "json.JSONEncoder": "default encode item_separator iterencode key_separator",
    "random.Random": (
        "VERSION betavariate choice choices expovariate gammavariate gauss "
        "getrandbits getstate lognormvariate normalvariate paretovariate "
        "randbytes randint random randrange sample seed setstate shuffle "
        "triangular uniform vonmisesvariate weibullvariate"
    ),
    "random.SystemRandom": (
        "VERSION betavariate choice choices expovariate gammavariate gauss "
        "getrandbits getstate lognormvariate normalvariate paretovariate "
        "randbytes randint random randrange sample seed setstate shuffle "
        "triangular uniform vonmisesvariate weibullvariate"
    ),
    "re.Match": (
        "end endpos expand group groupdict groups lastgroup lastindex pos re regs "
        "span start string"
    ),
    "re.Pattern": (
        "findall finditer flags fullmatch groupindex groups match pattern scanner "
        "search split sub subn"
    ),
    "re.error": "add_note args with_traceback",
    "statistics.LinearRegression": "count index intercept slope",
    "statistics.NormalDist": (
        "cdf from_samples inv_cdf mean median mode overlap pdf quantiles samples "
        "stdev variance zscore"
    ),
    "statistics.StatisticsError": "add_note args with_traceback",
    "string.Template": (
        "braceidpattern delimiter flags get_identifiers idpattern is_valid "
        "pattern safe_substitute substitute"
    ),
    "textwrap.TextWrapper": (
        "fill sentence_end_re unicode_whitespace_trans wordsep_re "
        "wordsep_simple_re wrap"
    ),
    "values.ContextManager": "",
    "values.SRE_Scanner": "match pattern search",
    "values._lru_cache_wrapper": "cache_clear cache_info",
    "values._tee": "",
    "values.builtin_function_or_method": "",
    "values.bytearray": (
        "append capitalize center clear copy count decode endswith expandtabs "
        "extend find fromhex hex index insert isalnum isalpha isascii isdigit "
        "islower isspace istitle isupper join ljust lower lstrip maketrans "
        "partition pop remove removeprefix removesuffix replace reverse rfind "
        "rindex rjust rpartition rsplit rstrip split splitlines startswith strip "
        "swapcase title translate upper zfill"
    ),
    "values.bytes": (
        "capitalize center count decode endswith expandtabs find fromhex hex "
        "index isalnum isalpha isascii isdigit islower isspace istitle isupper "
        "join ljust lower lstrip maketrans partition removeprefix removesuffix "
        "replace rfind rindex rjust rpartition rsplit rstrip split splitlines "
        "startswith strip swapcase title translate upper zfill"
    ),
    "values.dict_items": "isdisjoint mapping",
    "values.dict_keyiterator": "",
    "values.dict_keys": "isdisjoint mapping",
    "values.dict_values": "mapping",
    "values.function": "",
    "values.generator": "close gi_code gi_frame gi_running gi_suspended gi_yieldfrom send throw",
    "values.list_iterator": "",
    "values.method-wrapper": "",
    "values.range_iterator": "",
    "values.str_ascii_iterator": "",
    "values.tuple_iterator": "",
    # Added with the widened profile (issue 23): new builtins and modules, and the values
    # they hand out. Reviewed: FrozenInstanceError.obj is refused as AttributeError.obj;
    # a coroutine's send/throw, an async generator's asend/athrow and every attribute of
    # the future gather returns (get_loop) are refused by the guards; typing.Text is str
    # (its format is the guarded one); the rest take no names, format strings or code.
    "asyncio.CancelledError": "add_note args with_traceback",
    "asyncio.TimeoutError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.BaseExceptionGroup": (
        "add_note args derive exceptions message split subgroup with_traceback"
    ),
    "builtins.BlockingIOError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.BrokenPipeError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ChildProcessError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ConnectionAbortedError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ConnectionError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ConnectionRefusedError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ConnectionResetError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.EncodingWarning": "add_note args with_traceback",
    "builtins.ExceptionGroup": (
        "add_note args derive exceptions message split subgroup with_traceback"
    ),
    "builtins.FileExistsError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.FileNotFoundError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.InterruptedError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.IsADirectoryError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ModuleNotFoundError": "add_note args msg name path with_traceback",
    "builtins.NotADirectoryError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.PermissionError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.ProcessLookupError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.RecursionError": "add_note args with_traceback",
    "builtins.ResourceWarning": "add_note args with_traceback",
    "builtins.StopAsyncIteration": "add_note args with_traceback",
    "builtins.TimeoutError": (
        "add_note args characters_written errno filename filename2 strerror "
        "with_traceback"
    ),
    "builtins.bytearray": (
        "append capitalize center clear copy count decode endswith expandtabs extend find "
        "fromhex hex index insert isalnum isalpha isascii isdigit islower isspace istitle "
        "isupper join ljust lower lstrip maketrans partition pop remove removeprefix "
        "removesuffix replace reverse rfind rindex rjust rpartition rsplit rstrip split "
        "splitlines startswith strip swapcase title translate upper zfill"
    ),
    "builtins.bytes": (
        "capitalize center count decode endswith expandtabs find fromhex hex index "
        "isalnum isalpha isascii isdigit islower isspace istitle isupper join ljust lower "
        "lstrip maketrans partition removeprefix removesuffix replace rfind rindex rjust "
        "rpartition rsplit rstrip split splitlines startswith strip swapcase title "
        "translate upper zfill"
    ),
    "builtins.classmethod": "",
    "builtins.object": "",
    "builtins.property": "deleter fdel fget fset getter setter",
    "builtins.staticmethod": "",
    "builtins.super": "",
    "builtins.type": "",
    "copy.Error": "add_note args with_traceback",
    "copy.error": "add_note args with_traceback",
    "dataclasses.Field": (
        "compare default default_factory hash init kw_only metadata name repr type"
    ),
    "dataclasses.FrozenInstanceError": "add_note args name obj with_traceback",
    "dataclasses.InitVar": "type",
    "queue.Empty": "add_note args with_traceback",
    "queue.Full": "add_note args with_traceback",
    "queue.LifoQueue": "empty full get get_nowait join put put_nowait qsize task_done",
    "queue.PriorityQueue": "empty full get get_nowait join put put_nowait qsize task_done",
    "queue.Queue": "empty full get get_nowait join put put_nowait qsize task_done",
    "queue.SimpleQueue": "empty get get_nowait put put_nowait qsize",
    "time.struct_time": (
        "count index n_fields n_sequence_fields n_unnamed_fields tm_gmtoff tm_hour "
        "tm_isdst tm_mday tm_min tm_mon tm_sec tm_wday tm_yday tm_year tm_zone"
    ),
    "typing.Annotated": "",
    "typing.Any": "",
    "typing.BinaryIO": (
        "close closed fileno flush isatty mode name read readable readline readlines seek "
        "seekable tell truncate writable write writelines"
    ),
    "typing.Generic": "",
    "typing.IO": (
        "close closed fileno flush isatty mode name read readable readline readlines seek "
        "seekable tell truncate writable write writelines"
    ),
    "typing.NewType": "",
    "typing.ParamSpec": "args kwargs",
    "typing.ParamSpecArgs": "",
    "typing.ParamSpecKwargs": "",
    "typing.Protocol": "",
    "typing.SupportsAbs": "",
    "typing.SupportsBytes": "",
    "typing.SupportsComplex": "",
    "typing.SupportsFloat": "",
    "typing.SupportsIndex": "",
    "typing.SupportsInt": "",
    "typing.SupportsRound": "",
    "typing.Text": (
        "capitalize casefold center count encode endswith expandtabs find format "
        "format_map index isalnum isalpha isascii isdecimal isdigit isidentifier islower "
        "isnumeric isprintable isspace istitle isupper join ljust lower lstrip maketrans "
        "partition removeprefix removesuffix replace rfind rindex rjust rpartition rsplit "
        "rstrip split splitlines startswith strip swapcase title translate upper zfill"
    ),
    "typing.TextIO": (
        "buffer close closed encoding errors fileno flush isatty line_buffering mode name "
        "newlines read readable readline readlines seek seekable tell truncate writable "
        "write writelines"
    ),
    "typing.TypeVar": "",
    "typing.TypeVarTuple": "",
    "unicodedata.UCD": (
        "bidirectional category combining decimal decomposition digit east_asian_width "
        "is_normalized lookup mirrored name normalize numeric unidata_version"
    ),
    "values.Condition": "notify notifyAll notify_all wait wait_for",
    "values.ForwardRef": "",
    "values.NewType": "",
    "values.NotImplementedType": "",
    "values.ParamSpec": "args kwargs",
    "values.ProgramStream": "flush isatty write writelines",
    "values.SignalDict": "clear copy get items keys pop popitem setdefault update values",
    "values.SimpleNamespace": "",
    "values.TypeVar": "",
    "values._AnnotatedAlias": "copy_with",
    "values._CallableGenericAlias": "copy_with",
    "values._CallableType": "copy_with",
    "values._Feature": "getMandatoryRelease getOptionalRelease",
    "values._GatheringFuture": (
        "add_done_callback cancel cancelled done exception get_loop remove_done_callback "
        "result set_exception set_result"
    ),
    "values._GenericAlias": "copy_with",
    "values._KW_ONLY_TYPE": "",
    "values._LiteralGenericAlias": "copy_with",
    "values._MISSING_TYPE": "",
    "values._SpecialForm": "",
    "values._SpecialGenericAlias": "copy_with",
    "values._TupleType": "copy_with",
    "values._UnionGenericAlias": "copy_with",
    "values.async_generator": "aclose ag_await ag_code ag_frame ag_running asend athrow",
    "values.coroutine": (
        "close cr_await cr_code cr_frame cr_origin cr_running cr_suspended send throw"
    ),
    "values.ellipsis": "",
    "values.flags": (
        "bytes_warning count debug dev_mode dont_write_bytecode hash_randomization "
        "ignore_environment index inspect int_max_str_digits interactive isolated "
        "n_fields n_sequence_fields n_unnamed_fields no_site no_user_site optimize quiet "
        "safe_path utf8_mode verbose warn_default_encoding"
    ),
    "values.float_info": (
        "count dig epsilon index mant_dig max max_10_exp max_exp min min_10_exp min_exp "
        "n_fields n_sequence_fields n_unnamed_fields radix rounds"
    ),
    "values.hash_info": (
        "algorithm count cutoff hash_bits imag index inf modulus n_fields "
        "n_sequence_fields n_unnamed_fields nan seed_bits width"
    ),
    "values.int_info": (
        "bits_per_digit count default_max_str_digits index n_fields n_sequence_fields "
        "n_unnamed_fields sizeof_digit str_digits_check_threshold"
    ),
    "values.lock": "acquire acquire_lock locked locked_lock release release_lock",
    "values.super": "",
    "values.thread_info": (
        "count index lock n_fields n_sequence_fields n_unnamed_fields name version"
    ),
    "values.version_info": (
        "count index major micro minor n_fields n_sequence_fields n_unnamed_fields "
        "releaselevel serial"
    ),
}
