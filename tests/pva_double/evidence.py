"""What the pva test double provides and the public source each attribute rests on.

``CITED`` maps every attribute name the double's objects expose (and the module-level
names) to ``(status, source)``: ``PUBLIC`` when public code that uses the real ``pva``
(or a libpva API page) reads it, ``ASSUMED`` when nothing public shows it (the reader
must survive its absence; tests must not assert it as fact). ``tests/test_pop_double.py``
checks the double exposes nothing outside this list and ``tests/test_pop_reader.py``
checks the reader reads nothing outside it. README.md renders the same list for people.
"""

from __future__ import annotations

PUBLIC = "public"
ASSUMED = "assumption"

# Sources (repository + path @ the commit the code index shows, or doc page + SDK version).
TUTORIAL = "graphcore/tutorials tutorials/popvision/libpva/walkthrough.py @9787700"
PVTI_TUTORIAL = "graphcore/tutorials tutorials/popvision/reading_pvti_files/walkthrough.py @9787700"
PVA_UTILS = (
    "graphcore/ipu_tensorflow_addons ipu_tensorflow_addons/keras/experimental/auto_pipeline/utils/"
    "pva_utils.py @0831d99"
)
TFA_PROFILE = (
    "graphcore/ipu_tensorflow_addons ipu_tensorflow_addons/saved_model_tool/converter/autograph/"
    "profile.py @a8f0f99 (+ profile_test.py)"
)
POPLINER_OP = "graphcore/popliner popliner/operation.py @3db89ca"
POPLINER_STAGE = "graphcore/popliner popliner/stage.py (later version than @3db89ca: replication check)"
POPTORCH_TEST = "graphcore/poptorch tests/precompilation_test.py @c2a156f (test_pva_annotations)"
POPART_REPORT = "graphcore/popart tests/integration/report_test.py @143eeee"
POPART_SAVED = "graphcore/popart tests/integration/saved_executable.py @dda6ec9"
API_2_0 = "docs.graphcore.ai poplar-api 2.0.0 pva-python.html (SDK 2.0)"
API_3_1 = "docs.graphcore.ai libpva 3.1.0 api-python.html (SDK 3.1)"
REPTIL = (
    "public Graphcore profiling helper `Memory.peak_liveness` (module importing `_reptil_namespace`; "
    "found by the code index as file 41064946699, repository not named by the index)"
)
TF_RECOMP = "graphcore/tensorflow poplar plugin tests (recomputation: sum tile.memory.alwaysLiveBytes)"
FACTS_ONLY = "only shared/reference/popvision-facts.md lists it; no public code reads it"

CITED: dict[str, tuple[str, str]] = {
    # module level
    "openReport": (
        PUBLIC,
        f"{TUTORIAL}; overloads (filename) / (profileFilename, debugInfoFilename): {API_3_1}; "
        f"only (filename): {API_2_0}",
    ),
    "OperationAnalysis": (PUBLIC, f"{POPTORCH_TEST}; popliner/main.py; appears with SDK 3.x"),
    "ProgramVisitor": (PUBLIC, TUTORIAL),
    "openTrace": (PUBLIC, PVTI_TUTORIAL),
    "Program": (PUBLIC, f"pva.Program.Type.* in {POPLINER_OP}, {PVA_UTILS}"),
    "Target": (PUBLIC, f"pva.Target.Type.{{Ipu,IpuModel,Cpu,Unknown}} in {TFA_PROFILE}"),
    "IPU": (PUBLIC, f"pva.IPU.Architecture.Ipu2 in {POPART_REPORT}"),
    "Type": (PUBLIC, "pva.Program.Type / pva.Target.Type (see Program, Target)"),
    "Architecture": (PUBLIC, "pva.IPU.Architecture (see IPU)"),
    "value": (PUBLIC, f"pybind11 enum members show `<Name: N>` with a value on {API_3_1}"),
    # report
    "poplarVersion": (PUBLIC, TUTORIAL),
    "string": (PUBLIC, TUTORIAL),
    "major": (PUBLIC, f"{API_2_0}; {TFA_PROFILE} (version.major)"),
    "minor": (PUBLIC, f"{API_2_0}; {TFA_PROFILE}"),
    "point": (PUBLIC, f"{API_2_0}; {TFA_PROFILE}"),
    "packageHash": (PUBLIC, f"PoplarVersion.packageHash on {API_2_0} and {API_3_1}"),
    "version": (PUBLIC, TFA_PROFILE),
    "isUnstableFormat": (PUBLIC, f"{TFA_PROFILE}; {API_3_1}"),
    "compilation": (PUBLIC, TUTORIAL),
    "execution": (
        PUBLIC,
        f"{TUTORIAL}; always present, totalCycles.total == 0 without a profile: {POPART_SAVED}",
    ),
    # target
    "target": (PUBLIC, TUTORIAL),
    "numTiles": (PUBLIC, f"{TUTORIAL}; {TFA_PROFILE} (2,944 for 2 IPUs)"),
    "numIPUs": (PUBLIC, f"{TFA_PROFILE}; {PVA_UTILS}"),
    "tilesPerIpu": (PUBLIC, TFA_PROFILE),
    "bytesPerTile": (PUBLIC, f"{TFA_PROFILE} (638,976)"),
    "bytesPerIPU": (PUBLIC, TFA_PROFILE),
    "totalMemory": (PUBLIC, f"{TFA_PROFILE}; {POPART_REPORT}"),
    "clockFrequency": (PUBLIC, f"{TFA_PROFILE} (1330000000.0, a float in Hz)"),
    "numReplicas": (PUBLIC, f"{TFA_PROFILE}; liveness x numReplicas: {REPTIL}"),
    "ipusPerReplica": (PUBLIC, TFA_PROFILE),
    "tilesPerReplica": (PUBLIC, TFA_PROFILE),
    "memoryPerReplica": (PUBLIC, TFA_PROFILE),
    "type": (PUBLIC, f"target.type: {TFA_PROFILE}; program.type: {POPLINER_OP}, {PVA_UTILS}"),
    "architecture": (PUBLIC, POPART_REPORT),
    "name": (
        PUBLIC,
        f"program/variable/run/operation names: {PVA_UTILS}, {POPART_REPORT}, {POPTORCH_TEST}; "
        f"enum .name: {API_3_1}",
    ),
    # graph
    "graph": (PUBLIC, TUTORIAL),
    "numComputeSets": (PUBLIC, TUTORIAL),
    "numVertices": (ASSUMED, FACTS_ONLY),
    # tiles
    "tiles": (PUBLIC, f"{TUTORIAL}; spans every replica: {POPLINER_STAGE}"),
    "ipus": (PUBLIC, f"compilation.ipus[i].tiles: {PVA_UTILS}; step.ipus[i]: {TUTORIAL}"),
    "memory": (PUBLIC, TUTORIAL),
    "total": (
        PUBLIC,
        f"memory.total: {TUTORIAL}; category.<cat>.total: {PVA_UTILS}; totalCycles.total: {POPART_SAVED}",
    ),
    "includingGaps": (PUBLIC, TUTORIAL),
    "excludingGaps": (PUBLIC, f"{TFA_PROFILE}; {PVA_UTILS}"),
    "overflowed": (PUBLIC, TFA_PROFILE),
    "alwaysLiveBytes": (PUBLIC, f"{TF_RECOMP}; {REPTIL}"),
    "notAlwaysLiveBytes": (PUBLIC, REPTIL),
    "category": (PUBLIC, PVA_UTILS),
    "vertexCode": (PUBLIC, PVA_UTILS),
    "internalExchangeCode": (PUBLIC, PVA_UTILS),
    "vertexInstanceState": (PUBLIC, PVA_UTILS),
    "controlCode": (PUBLIC, PVA_UTILS),
    "globalExchangeCode": (PUBLIC, REPTIL),
    "hostExchangeCode": (PUBLIC, REPTIL),
    "constant": (PUBLIC, REPTIL),
    "copyDescriptor": (
        ASSUMED,
        f"a category name in {TFA_PROFILE} (as a variable name); as a memory category: {FACTS_ONLY}",
    ),
    "vectorListDescriptor": (ASSUMED, f"as copyDescriptor ({TFA_PROFILE})"),
    "vertexFieldData": (ASSUMED, f"as copyDescriptor ({TFA_PROFILE})"),
    # programs
    "programs": (PUBLIC, f"compilation.programs: {PVA_UTILS}; op.programs(): {POPLINER_OP}"),
    "children": (PUBLIC, f"program.children: {POPLINER_OP}; event.children(): {PVTI_TUTORIAL}"),
    "vars": (PUBLIC, f"op.vars entries read by `_id` only: {POPLINER_OP}"),
    "_id": (PUBLIC, POPLINER_OP),
    "codeBytesByTile": (PUBLIC, f"{PVA_UTILS} (DoExchange programs); {POPLINER_OP}"),
    "accept": (PUBLIC, TUTORIAL),
    "alwaysLiveVariables": (PUBLIC, f"{PVA_UTILS} (notes traversal is slow); {TFA_PROFILE}"),
    "size": (PUBLIC, f"alwaysLiveVariables[].size, notAlwaysLiveMemory.variables[].size: {TFA_PROFILE}"),
    # liveness
    "livenessProgramSteps": (PUBLIC, f"{PVA_UTILS}; {TFA_PROFILE}; per replica: {REPTIL}"),
    "program": (PUBLIC, f"{PVA_UTILS} (step.program.name/type); {TUTORIAL}"),
    "notAlwaysLiveMemory": (PUBLIC, f"{TFA_PROFILE}; {TF_RECOMP}"),
    "bytes": (PUBLIC, f"notAlwaysLiveMemory.bytes: {TF_RECOMP}; {PVA_UTILS} (ForIpu(i).bytes)"),
    "variables": (PUBLIC, TFA_PROFILE),
    "notAlwaysLiveMemoryForIpu": (PUBLIC, PVA_UTILS),
    "notAlwaysLiveMemoryForTile": (
        ASSUMED,
        "a public test calls it (code index file 15312848247, repository "
        "not named); values are the double's invention",
    ),
    # execution
    "totalCycles": (PUBLIC, POPART_SAVED),
    "runs": (PUBLIC, f"{POPART_REPORT}; {TFA_PROFILE}"),
    "steps": (PUBLIC, f"{TUTORIAL}; runs[r].steps: {TFA_PROFILE}"),
    "microseconds": (PUBLIC, TFA_PROFILE),
    "start": (PUBLIC, TFA_PROFILE),
    "end": (PUBLIC, TFA_PROFILE),
    "cycles": (PUBLIC, TUTORIAL),
    "activeCycles": (PUBLIC, f"{TFA_PROFILE}; {PVA_UTILS}"),
    "cyclesFrom": (PUBLIC, TFA_PROFILE),
    "cyclesTo": (PUBLIC, TFA_PROFILE),
    "max": (PUBLIC, TFA_PROFILE),
    "min": (PUBLIC, PVA_UTILS),
    "tileBalance": (PUBLIC, f"{TFA_PROFILE} (about 0.049; 0..1)"),
    "activeTileBalance": (PUBLIC, f"{TFA_PROFILE} (about 0.686)"),
    "dataIn": (PUBLIC, PVA_UTILS),
    "dataOut": (PUBLIC, PVA_UTILS),
    "cyclesByTile": (ASSUMED, FACTS_ONLY),
    "computeSets": (ASSUMED, FACTS_ONLY),
    "computeset": (PUBLIC, f"{TUTORIAL}; {POPLINER_OP}"),
    # operations
    "operations": (PUBLIC, POPTORCH_TEST),
    "firstStepIndex": (PUBLIC, POPLINER_OP),
    "lastStepIndex": (PUBLIC, POPLINER_OP),
    "debugContext": (PUBLIC, f"{POPTORCH_TEST}; {POPLINER_OP}"),
    "replacedDebugContext": (PUBLIC, POPTORCH_TEST),
    "layer": (PUBLIC, f"a JSON string: json.loads(ctx.layer)['layer'] in {POPTORCH_TEST}"),
    "parents": (PUBLIC, POPTORCH_TEST),
    "json": (PUBLIC, f"{POPTORCH_TEST}; {POPLINER_OP}"),
    "location": (PUBLIC, POPTORCH_TEST),
    "fileName": (PUBLIC, POPTORCH_TEST),
    "lineNumber": (PUBLIC, POPTORCH_TEST),
    "id": (ASSUMED, FACTS_ONLY),
    # traces
    "processes": (PUBLIC, PVTI_TUTORIAL),
    "process": (PUBLIC, PVTI_TUTORIAL),
    "pid": (PUBLIC, PVTI_TUTORIAL),
    "threads": (PUBLIC, PVTI_TUTORIAL),
    "thread": (PUBLIC, PVTI_TUTORIAL),
    "tid": (PUBLIC, PVTI_TUTORIAL),
    "events": (PUBLIC, PVTI_TUTORIAL),
    "label": (PUBLIC, PVTI_TUTORIAL),
    "duration": (PUBLIC, f'{PVTI_TUTORIAL} ("lasted N microseconds")'),
    "timestamp": (ASSUMED, f"the prose of {PVTI_TUTORIAL} says events have a timestamp; no code reads one"),
    "channel": (ASSUMED, f"the prose of {PVTI_TUTORIAL} says events have a channel; no code reads one"),
}

#: Behaviours (not attributes) and their basis.
BEHAVIOURS: dict[str, tuple[str, str]] = {
    "liveness is per replica; compilation.tiles spans every replica": (PUBLIC, f"{REPTIL}; {POPLINER_STAGE}"),
    "alwaysLiveVariables are one replica's": (
        ASSUMED,
        "no public code says; the double stores one replica's",
    ),
    "step.ipus has one entry per IPU of the target (numIPUs)": (
        PUBLIC,
        f"{PVA_UTILS} (range(numIPUs)); with replication: assumed the same",
    ),
    "execution always present; no profile: no steps, totalCycles.total == 0": (PUBLIC, POPART_SAVED),
    "enums are pybind11 enums read with .name": (PUBLIC, f"{TFA_PROFILE}; {POPART_REPORT}; {API_3_1}"),
    "str() of an enum is 'Type.Name'": (ASSUMED, "pybind11's; older pybind11 differs (repr on the 2.0 page)"),
    "architecture names Ipu1 / Ipu21": (ASSUMED, "only Ipu2 is public"),
    "openReport(path, debug) raises TypeError on SDK 2.x": (
        PUBLIC,
        f"{API_2_0} lists only openReport(filename); pybind11 raises TypeError on a bad overload",
    ),
    "framework context found by walking parents from replacedDebugContext[0] or debugContext": (
        PUBLIC,
        POPTORCH_TEST,
    ),
    "op.vars entries carry no size": (PUBLIC, f"{POPLINER_OP} reads only var._id"),
    "import pva can raise RuntimeError": (ASSUMED, "reported for poptorch's test helpers; not re-verified"),
    "pvti durations are whole microseconds": (
        PUBLIC,
        f'{PVTI_TUTORIAL} ("lasted N microseconds"); integer type assumed',
    ),
    "pvti thread ids can be 64-bit": (
        ASSUMED,
        "host thread ids (pthread) exceed 32 bits; not shown publicly",
    ),
    "unknown-shape variant: no activeCycles / tileBalance / memory.overflowed": (
        ASSUMED,
        "no SDK is known to lack them; survival test",
    ),
    "unknown-shape variant: op.vars entries with bytes": (ASSUMED, "survival test of the summing path"),
}


def cited_names() -> set[str]:
    """Every attribute name the double's list cites (public or assumed)."""
    return set(CITED)


def assumed_names() -> set[str]:
    """Attribute names without public evidence."""
    return {name for name, (status, _) in CITED.items() if status == ASSUMED}
