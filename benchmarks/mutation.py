"""Mutation testing of calibkit's core: formulas, kernels, engines, validation, calibrator fitting.

Run from the repository root, with cosmic-ray installed in any environment (a separate one keeps
its dependencies out of the project's)::

    python -m venv /tmp/crvenv && /tmp/crvenv/bin/pip install cosmic-ray==8.7.0
    nice -n 10 python benchmarks/mutation.py --cosmic-ray /tmp/crvenv/bin/cosmic-ray --json mutation.json

Why cosmic-ray and not mutmut: mutmut 3 rewrites every function into a "trampoline" that looks up
the mutant to run at call time (a dict of Python functions keyed by an environment variable);
numba cannot compile that, so every kernel (and everything calling one) would fail under mutmut.
cosmic-ray writes one mutant at a time into the source file and runs a command: the mutant is
ordinary source, which is what numba (or plain Python) sees. Only two of its commands are used:
``init``/``dump`` to enumerate the mutants and ``apply`` to write one; this script runs the tests,
the timeouts and the bookkeeping itself.

Safety: the mutants are written only into throw-away copies of the repository in a temporary
folder (one per worker, made from ``git ls-files``), never into the checkout; after every mutant
the file is written back with its original bytes *and* modification time, so numba's cache (stamped
with the kernel sources' mtimes and sizes, ``calibkit/_numba/cache.py``) stays valid.

Kernels: a cold compile of the kernels takes about two minutes, so a mutant of a kernel module
(``calibkit/metrics/_kernels/*.py``, ``calibkit/calibrators/_kernels.py``) is run with
``NUMBA_DISABLE_JIT=1``: the mutated source runs as plain Python (no stale cache is possible, and
nothing is compiled), through the plugin ``benchmarks/mutation_nojit.py``, which gives the two
``@intrinsic`` bit casts and the one ``@overload`` Python bodies. The limit: a mutant numba would
reject at compile time, or whose effect is only integer wrap-around in compiled code, is judged by
Python's behaviour. The other modules call the compiled kernels from the warm cache copied with
the sources.

Budget (30 minutes on 2 cores): cosmic-ray's full operator set gives ~13,000 mutants here (each
binary operator becomes every other one). ``OPERATORS`` keeps one natural replacement per
operator (``+``->``-``, ``*``->``/``, ``<``->``<=``, ...), numbers +-1, boolean and unary flips,
``not`` insertion, zero-iteration loops and exception replacement; ``RemoveDecorator`` is left out
(removing ``@njit`` only slows a kernel; removing ``@overload``/``@property`` fails at import).
``--max-per-module`` then takes a fixed, hash-ordered sample of each module's mutants (the same
sample on every run), so the figures are a kill rate over that sample.

Output: per module and in total, killed / survived / timeout / equivalent, the kill rate over the
non-equivalent mutants (a timeout counts as killed), and every survivor with file:line, operator
and diff. ``--rerun mutation.json`` runs again only the survivors of an earlier run (tests are only
ever added, so a killed mutant stays killed), keeping its other results.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KERNEL_FILES = re.compile(r"calibkit/(metrics/_kernels/[^/]+|calibrators/_kernels)\.py$")

# One natural replacement per operator (see the module docstring).
OPERATORS = re.compile(
    r"core/("
    r"ReplaceBinaryOperator_(Add_Sub|Sub_Add|Mul_Div|Div_Mul|FloorDiv_Mul|Mod_FloorDiv|Pow_Mul|LShift_RShift"
    r"|RShift_LShift|BitAnd_BitOr|BitOr_BitAnd|BitXor_BitAnd)"
    r"|ReplaceComparisonOperator_(Lt_LtE|LtE_Lt|Gt_GtE|GtE_Gt|Eq_NotEq|NotEq_Eq|Is_IsNot|IsNot_Is)"
    r"|ReplaceUnaryOperator_(Delete_USub|Delete_Not|Delete_Invert)"
    r"|NumberReplacer|AddNot|ZeroIterationForLoop|ReplaceTrueWithFalse|ReplaceFalseWithTrue"
    r"|ReplaceAndWithOr|ReplaceOrWithAnd|ReplaceBreakWithContinue|ReplaceContinueWithBreak|ExceptionReplacer"
    r")$"
)

FAST_METRICS = ["tests/metrics/test_spec_examples.py", "tests/metrics/test_properties.py"]
NEW_METRICS = ["tests/metrics/test_core_against_loops.py", "tests/metrics/test_engine_details.py"]
NEW_CALIBRATORS = ["tests/calibrators/test_fitting_against_loops.py"]
# The fits' own suite and its bad-input file (logits far from unit scale: the baselines' rescaling)
FIT_CHECKS = ["tests/calibrators/test_fitting.py", "tests/calibrators/test_bad_input.py"]


@dataclass(frozen=True)
class Module:
    """A module under test and the fast tests run against each of its mutants."""

    path: str
    tests: tuple[str, ...]


# The tests of each module: the fast files that cover it (measured: a few seconds each), first the
# new small-input files, which kill most mutants within a second. Kernel modules run as plain Python
# (see the docstring), where only small inputs are affordable: the new files only.
MODULES = [
    Module("calibkit/metrics/formulas.py", (*NEW_METRICS, *FAST_METRICS, "tests/metrics/test_fce_variant.py")),
    Module("calibkit/metrics/validation.py", (*NEW_METRICS, "tests/metrics/test_bad_input.py")),
    Module("calibkit/metrics/engines/numba_engine.py", (*NEW_METRICS, *FAST_METRICS, "tests/metrics/test_threads.py")),
    Module("calibkit/metrics/engines/torch_engine.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/bins.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/constants.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/rows.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/accumulate.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/ace.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/top.py", (*NEW_METRICS,)),
    Module("calibkit/metrics/_kernels/short.py", (*NEW_METRICS,)),
    Module("calibkit/calibrators/_kernels.py", (*NEW_CALIBRATORS,)),
    Module("calibkit/calibrators/temperature.py", (*NEW_CALIBRATORS, *FIT_CHECKS)),
    Module("calibkit/calibrators/baselines.py", (*NEW_CALIBRATORS, *FIT_CHECKS)),
]

# Mutants that cannot change any result, excluded from the counts: (file or "*", operator, a fragment
# of the *mutated* line, spaces ignored, reason). Matched on the text, so that it survives edits elsewhere.
EQUIVALENT: list[tuple[str, str, str, str]] = [
    (
        "calibkit/metrics/validation.py",
        "NumberReplacer",
        "p.element_size()>5",
        "tensor element sizes are 1, 2, 4 or 8 bytes: > 5 and > 4 pick the same dtypes",
    ),
    (
        "calibkit/metrics/engines/torch_engine.py",
        "NumberReplacer",
        "c_top*n_fuzzy-2.25",
        "the four candidate bins start one lower: floor(cM - 2.25) + 3 = floor(cM + 0.75) still reaches the "
        "highest bin with a membership (bin m has one for cM in (m - 0.25, m + 1.25)); the added low one has none",
    ),
    (
        "calibkit/metrics/engines/torch_engine.py",
        "ReplaceUnaryOperator_Delete_Not",
        "ifbool(keep.all()):",
        "masked rows left in a lean block fail its label check (-100 < 0): the block is redone by the general "
        "path, which skips them; the same sums",
    ),
    (
        "calibkit/metrics/_kernels/accumulate.py",
        "AddNot",
        "BLOCK_ENTRIES//K)ifnotblockedelsestop-start",
        "block size only: logit rows are then converted in one block of the whole range (more memory), "
        "probability rows are read in place either way",
    ),
    (
        "calibkit/metrics/_kernels/ace.py",
        "NumberReplacer",
        "shift=1",
        "the initial shift is overwritten on the first slot (current starts at -1) before any use",
    ),
    (
        "calibkit/calibrators/temperature.py",
        "ReplaceBinaryOperator_Mul_Div",
        "x0=beta*math.exp(-g/(beta/hess+g))",
        "the start of the bracketed 1-D minimisation: the same minimum (fits match scipy to 1e-6), other iterations",
    ),
    (
        "calibkit/calibrators/temperature.py",
        "ReplaceBinaryOperator_FloorDiv_Mul",
        "step=data.logits.shape[0]*_WARM_ROWS",
        "the warm start's subsample: only where the full-data Newton starts, not its minimum",
    ),
    (
        "calibkit/calibrators/temperature.py",
        "NumberReplacer",
        "data.num_classes,1",
        "n_kept of the warm start's subsample, which its NLL pass does not read: the start only",
    ),
    (
        "calibkit/calibrators/baselines.py",
        "NumberReplacer",
        "return2.0",
        "VS and MS are equivariant to rescaling the logits, and 2 is a power of two: the same fit on z / 2",
    ),
    (
        "calibkit/calibrators/baselines.py",
        "NumberReplacer",
        "tolerance_grad=-0.9999999999",
        "L-BFGS then stops on tolerance_change or max_iter instead: the same minimum, more iterations",
    ),
    (
        "*",
        "ReplaceBinaryOperator_BitOr_BitAnd",
        "&None",
        "a type annotation (X | None): never evaluated, every module has `from __future__ import annotations`",
    ),
    ("calibkit/metrics/_kernels/bins.py", "ReplaceComparisonOperator_Lt_LtE", "ifb<=0:", "b == 0 returns 0 either way"),
    (
        "calibkit/metrics/_kernels/bins.py",
        "ReplaceComparisonOperator_Lt_LtE",
        "ifkey<=0:",
        "key 0 returns 0 either way",
    ),
    ("calibkit/metrics/_kernels/bins.py", "NumberReplacer", "ifkey<1:", "key 0 returns 0 either way"),
    (
        "calibkit/metrics/_kernels/bins.py",
        "NumberReplacer",
        "EDGE_SHRINK))-1,0),n_bins-0)",
        "p <= 1 is checked, so ceil(p M (1 - 2**-40)) - 1 <= M - 1: the upper clamp never binds",
    ),
    (
        "calibkit/metrics/_kernels/constants.py",
        "NumberReplacer",
        "BLOCK_ENTRIES=",
        "the rows converted per block: only the block size changes, each row's values do not",
    ),
    (
        "calibkit/metrics/_kernels/constants.py",
        "NumberReplacer",
        "LANES=",
        "copies of each histogram, summed before use: integer counts and float sums in another grouping "
        "(below the tests' 1e-9 tolerance)",
    ),
    ("calibkit/metrics/_kernels/constants.py", "NumberReplacer", "N_SCALARS=8", "one more scalars column, never read"),
    (
        "calibkit/metrics/_kernels/constants.py",
        "NumberReplacer",
        "LONG_ROW=",
        "only moves the class count where rows switch to the long-row loops, which build the same values "
        "(rows.py: every kernel agrees to the bit)",
    ),
    ("calibkit/metrics/_kernels/ace.py", "NumberReplacer", "=np.zeros(n_sub_max+2", "a larger scratch buffer"),
    (
        "calibkit/metrics/_kernels/ace.py",
        "NumberReplacer",
        "whilelimit>1",
        "the number of radix sub-buckets of a slot: speed only, every sub-bucket is summed or sorted exactly",
    ),
    (
        "calibkit/metrics/_kernels/ace.py",
        "NumberReplacer",
        "ifv<-1:",
        "a packed sample is -1 only for a NaN pattern, which never gets here: v < -1 equals v < 0",
    ),
    ("calibkit/calibrators/_kernels.py", "NumberReplacer", "N_OUT=7", "one more output column, never read"),
    (
        "calibkit/calibrators/_kernels.py",
        "ReplaceComparisonOperator_Gt_GtE",
        "ifv>=z_max:",
        "a tie keeps the same maximum",
    ),
    (
        "calibkit/calibrators/temperature.py",
        "NumberReplacer",
        "flatnonzero(counts)[-1]",
        "the message is built when exactly one class is present: its first and last index agree",
    ),
    (
        "calibkit/metrics/engines/numba_engine.py",
        "NumberReplacer",
        "cut=(inside>-1)&(inside<total)",
        "marks buckets with no sample inside the range as cut too: their exact sums are 0, as the split's",
    ),
    (
        "calibkit/metrics/engines/torch_engine.py",
        "ReplaceBinaryOperator_BitAnd_BitOr",
        "cut=(inside>0)|(inside<total)",
        "marks every bucket as cut: resolving an uncut bucket exactly gives its proportional sums (0 or all)",
    ),
    (
        "calibkit/metrics/engines/numba_engine.py",
        "NumberReplacer",
        "defkernel(args,classes=(",
        "only the tuple's length is read (one compiled loop per class count)",
    ),
    (
        "calibkit/metrics/engines/numba_engine.py",
        "ReplaceComparisonOperator_Gt_GtE",
        "np.where(upper>=lower,",
        "upper == lower only for the bucket of 1.0, whose largest value 1 - 2**-53 is in the same last bin "
        "as 1.0 for every bin count <= MAX_BINS",
    ),
]


def equivalent_reason(m: dict, mutated_line: str) -> str | None:
    text = "".join(mutated_line.split())
    for path, operator, fragment, reason in EQUIVALENT:
        if path in (m["path"], "*") and m["operator"] == f"core/{operator}" and fragment in text:
            return reason
    return None


RUNNING: set[subprocess.Popen] = set()
STOP = threading.Event()


def sh(cmd: list[str], cwd: Path, env: dict | None = None, timeout: float | None = None) -> tuple[int | None, str]:
    """Run a command; return (exit code, stdout+stderr), exit code None on timeout."""
    with subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    ) as proc:
        RUNNING.add(proc)
        try:
            out, _ = proc.communicate(timeout=timeout)
            return proc.returncode, out
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
            return None, out
        finally:
            RUNNING.discard(proc)


def stop(signum: int, _frame: object) -> None:
    """On Ctrl-C or SIGTERM: kill the running tests (their process groups), so that the sandboxes can go."""
    STOP.set()
    for proc in list(RUNNING):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    raise SystemExit(f"stopped by signal {signum}")


def make_sandbox(folder: Path) -> None:
    """Copy the repository's files (tracked and new, not ignored) and numba's cache into ``folder``, mtimes kept."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, stdout=subprocess.PIPE, text=True, check=True
    ).stdout.split("\n")
    cached = [str(p.relative_to(ROOT)) for p in (ROOT / "calibkit").rglob("__pycache__/*.nb[ic]")]
    for name in [*listed, *cached]:
        if name and (ROOT / name).is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, folder / name)


def enumerate_mutants(cosmic_ray: str, module: Module, sandbox: Path, work: Path) -> list[dict]:
    """All of cosmic-ray's mutants of a module: dicts with operator, occurrence, line."""
    stem = module.path.replace("/", "_")
    config = work / f"{stem}.toml"
    config.write_text(
        "[cosmic-ray]\n"
        f'module-path = "{module.path}"\n'
        "timeout = 60.0\nexcluded-modules = []\n"
        'test-command = "true"\n'
        '[cosmic-ray.distributor]\nname = "local"\n'
    )
    db = work / f"{stem}.sqlite"
    code, out = sh([cosmic_ray, "init", str(config), str(db)], cwd=sandbox)
    if code != 0:
        raise SystemExit(f"cosmic-ray init failed for {module.path}:\n{out}")
    code, out = sh([cosmic_ray, "dump", str(db)], cwd=sandbox)
    mutants = []
    for line in out.splitlines():
        item, _ = json.loads(line)
        m = item["mutations"][0]
        line = m["start_pos"][0]
        mutants.append(
            {"path": module.path, "operator": m["operator_name"], "occurrence": m["occurrence"], "line": line}
        )
    return sorted(mutants, key=lambda m: (m["line"], m["operator"], m["occurrence"]))


def key(m: dict) -> str:
    return f"{m['path']}|{m['operator']}|{m['occurrence']}"


def existing_tests(module: Module, folder: Path) -> list[str]:
    return [t for t in module.tests if (folder / t).is_file()]


def test_command(module: Module, folder: Path) -> tuple[list[str], dict]:
    kernel = bool(KERNEL_FILES.search(module.path))
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-m", "not slow"]
    env = dict(os.environ, CALIBKIT_BACKEND="numba", PYTHONDONTWRITEBYTECODE="1")
    if kernel:
        # plain Python raises its own error on NaN (int(math.ceil(nan))) before the kernels' check does
        cmd += ["-p", "mutation_nojit", "-k", "not nonfinite"]
        env["NUMBA_DISABLE_JIT"] = "1"
    return cmd + existing_tests(module, folder), env


class Worker:
    """One sandbox copy of the repository; runs one mutant at a time in it."""

    def __init__(self, cosmic_ray: str, folder: Path) -> None:
        self.cosmic_ray = cosmic_ray
        self.folder = folder

    def env(self, base: dict) -> dict:
        return dict(base, PYTHONPATH=os.pathsep.join([str(self.folder), str(self.folder / "benchmarks")]))

    def baseline(self, module: Module) -> float:
        cmd, env = test_command(module, self.folder)
        start = time.monotonic()
        code, out = sh(cmd, cwd=self.folder, env=self.env(env), timeout=600)
        if code != 0:
            raise SystemExit(f"the tests of {module.path} fail without a mutant:\n{out[-3000:]}")
        return time.monotonic() - start

    def run(self, module: Module, m: dict, limit: float) -> dict:
        target = self.folder / m["path"]
        original = target.read_bytes()
        stat = target.stat()
        try:
            code, out = sh([self.cosmic_ray, "apply", m["path"], m["operator"], str(m["occurrence"])], cwd=self.folder)
            mutated = target.read_text()
            if code != 0 or mutated.encode() == original:
                return dict(m, outcome="incompetent", diff="", output=out[-2000:])
            reason = equivalent_reason(m, mutated.splitlines()[m["line"] - 1])
            diff = "".join(
                difflib.unified_diff(
                    original.decode().splitlines(True), mutated.splitlines(True), m["path"], m["path"], n=1
                )
            )
            if reason:
                return dict(m, outcome="equivalent", diff=diff, reason=reason)
            if not existing_tests(module, self.folder):
                return dict(m, outcome="survived", diff=diff, output="no test file of this module exists")
            cmd, env = test_command(module, self.folder)
            code, out = sh(cmd, cwd=self.folder, env=self.env(env), timeout=limit)
            outcome = "timeout" if code is None else "survived" if code == 0 else "killed"
            if code in (4, 5):  # pytest's usage error, no tests collected: not a verdict on the mutant
                outcome = "incompetent"
            return dict(m, outcome=outcome, diff=diff, output=out[-1500:] if outcome != "killed" else "")
        finally:
            target.write_bytes(original)
            os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def report(results: list[dict], modules: list[Module]) -> float:
    names = ("killed", "timeout", "survived", "equivalent", "incompetent", "sampled out")
    print(f"\n{'module':48s} " + " ".join(f"{n:>11s}" for n in names) + "   kill rate")
    totals = dict.fromkeys(names, 0)
    for module in modules:
        counts = dict.fromkeys(names, 0)
        for r in results:
            if r["path"] == module.path:
                counts[r["outcome"]] += 1
        for n in names:
            totals[n] += counts[n]
        print(f"{module.path:48s} " + " ".join(f"{counts[n]:11d}" for n in names) + f"   {rate(counts):.1%}")
    print(f"{'total':48s} " + " ".join(f"{totals[n]:11d}" for n in names) + f"   {rate(totals):.1%}")
    survivors = [r for r in results if r["outcome"] == "survived"]
    print(f"\n{len(survivors)} survivors:")
    for r in survivors:
        print(f"\n--- {r['path']}:{r['line']} {r['operator']} #{r['occurrence']}\n{r['diff']}")
    equivalents = [r for r in results if r["outcome"] == "equivalent"]
    print(f"\n{len(equivalents)} equivalent mutants excluded:")
    for r in equivalents:
        print(f"  {r['path']}:{r['line']} {r['operator']}: {r['reason']}")
    return rate(totals)


def rate(counts: dict) -> float:
    judged = counts["killed"] + counts["timeout"] + counts["survived"]
    return (counts["killed"] + counts["timeout"]) / judged if judged else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cosmic-ray", default=shutil.which("cosmic-ray"), help="the cosmic-ray executable")
    parser.add_argument("--workers", type=int, default=2, help="sandboxes running mutants side by side")
    parser.add_argument("--max-per-module", type=int, default=60, help="fixed sample of each module's mutants")
    parser.add_argument("--modules", nargs="*", help="only these module paths")
    parser.add_argument("--json", type=Path, help="write every result here")
    parser.add_argument("--without", nargs="*", default=[], help="test files left out (a run before they existed)")
    parser.add_argument("--rerun", type=Path, help="run only the survivors and timeouts of this earlier --json")
    args = parser.parse_args()
    if not args.cosmic_ray:
        raise SystemExit("cosmic-ray not found: pip install cosmic-ray==8.7.0, then pass --cosmic-ray PATH")
    modules = [m for m in MODULES if not args.modules or m.path in args.modules]
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="calibkit-mutation-") as tmp:
        work = Path(tmp)
        workers = []
        for i in range(args.workers):
            folder = work / f"w{i}"
            folder.mkdir()
            make_sandbox(folder)
            for name in args.without:
                (folder / name).unlink(missing_ok=True)
            workers.append(Worker(args.cosmic_ray, folder))
        previous = {}
        if args.rerun:
            previous = {key(r): r for r in json.loads(args.rerun.read_text())}
        results, todo = [], []
        with ThreadPoolExecutor(len(workers)) as pool:
            found = list(
                pool.map(lambda mod: enumerate_mutants(args.cosmic_ray, mod, workers[0].folder, work), modules)
            )
        for module, mutants in zip(modules, found):
            kept = [m for m in mutants if OPERATORS.match(m["operator"])]
            order = sorted(kept, key=lambda m: hashlib.sha1(key(m).encode()).hexdigest())
            sample = {key(m) for m in order[: args.max_per_module]}
            for m in kept:
                if key(m) not in sample:
                    results.append(dict(m, outcome="sampled out"))
                elif key(m) in previous and previous[key(m)]["outcome"] not in ("survived", "timeout"):
                    results.append(previous[key(m)])
                else:
                    todo.append((module, m))
            print(f"{module.path}: {len(mutants)} mutants, {len(kept)} with the kept operators", flush=True)
        limits = {}
        tested = [mod for mod in {mod.path: mod for mod, _ in todo}.values() if existing_tests(mod, workers[0].folder)]
        with ThreadPoolExecutor(len(workers)) as pool:
            times = pool.map(lambda im: workers[im[0] % len(workers)].baseline(im[1]), enumerate(tested))
            for module, seconds in zip(tested, times):
                limits[module.path] = max(30.0, 4 * seconds)
                print(f"baseline {module.path}: {seconds:.1f} s, timeout {limits[module.path]:.0f} s", flush=True)
        jobs: queue.Queue = queue.Queue()
        for item in todo:
            jobs.put(item)
        lock = threading.Lock()
        print(f"running {len(todo)} mutants on {len(workers)} workers", flush=True)

        def drain(worker: Worker) -> None:
            while not STOP.is_set():
                try:
                    module, m = jobs.get_nowait()
                except queue.Empty:
                    return
                r = worker.run(module, m, limits.get(module.path, 0.0))
                with lock:
                    results.append(r)
                    done = sum(1 for x in results if x["outcome"] != "sampled out")
                    print(f"[{done}] {r['outcome']:11s} {m['path']}:{m['line']} {m['operator']}", flush=True)

        threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
        for t in threads:
            t.start()
        for t in threads:
            while t.is_alive():
                t.join(timeout=1.0)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    kill_rate = report(results, modules)
    print(f"\nwall time {time.monotonic() - start:.0f} s; kill rate over non-equivalent mutants {kill_rate:.1%}")


if __name__ == "__main__":
    main()
