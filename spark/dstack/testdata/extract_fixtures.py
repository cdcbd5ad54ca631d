"""Regenerates the JSON fixtures in this directory from dstack's own router tests.

Usage: python3 extract_fixtures.py DSTACK_CHECKOUT

It reads src/tests/_internal/server/routers/test_runs.py and test_fleets.py,
evaluates the dict builders and literals named in SOURCES.md with the test
helpers' placeholders (SomeUUID4Str, project, spec) replaced by fixed values,
and writes the JSON dstack's tests send or expect. Nothing is edited by hand.
"""

import ast
import copy
import itertools
import json
import pathlib
import sys
import types
from typing import Dict, List, Optional, Union

root = pathlib.Path(sys.argv[1])
out = pathlib.Path(__file__).parent
runs_src = (root / "src/tests/_internal/server/routers/test_runs.py").read_text()
fleets_src = (root / "src/tests/_internal/server/routers/test_fleets.py").read_text()

_uuids = itertools.count(1)


def some_uuid():
    return "00000000-0000-4000-8000-%012d" % next(_uuids)


def functions(src, names):
    tree = ast.parse(src)
    ns = {
        "copy": copy, "json": json, "Dict": Dict, "List": List, "Optional": Optional,
        "Union": Union, "SomeUUID4Str": str, "InstanceOfferWithAvailability": object,
        "ApplyAction": types.SimpleNamespace(CREATE=types.SimpleNamespace(value="create")),
        "Run": object, "MountPoint": object,
    }
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            exec(compile(ast.Module(body=[node], type_ignores=[]), "test_runs.py", "exec"), ns)
    return ns


def write(name, value):
    (out / name).write_text(json.dumps(value, indent=2, sort_keys=True) + "\n")


ns = functions(runs_src, {"get_default_gpu_dict", "get_submitted_run_spec_dict", "get_dev_env_run_dict"})
# TestApplyPlan.test_submits_new_run_if_no_current_resource: the body it posts
# to /runs/apply and the Run it expects back.
run_dict = ns["get_dev_env_run_dict"](
    run_id="1b0e1b45-2f8c-4ab6-8010-a0d1a3e44e0e",
    job_id="1b0e1b45-2f8c-4ab6-8010-a0d1a3e44e0f",
    project_name="test_project",
    username="test_user",
    submitted_at="2023-01-02T03:04:00Z",
    last_processed_at="2023-01-02T03:04:00Z",
    finished_at=None,
    run_name="test-run",
    repo_id="test_repo",
    privileged=False,
)
write("run_dev_env.json", run_dict)
write("apply_request_dev_env.json", {"plan": {"run_spec": copy.deepcopy(run_dict["run_spec"]), "current_resource": None}, "force": False})
# TestStopRuns.test_marks_submitted_run_as_terminating.
write("stop_request.json", {"runs_names": ["test-run"], "abort": False})
# TestGetRun.test_returns_run_given_name.
write("get_run_request.json", {"run_name": "test-run"})
# TestListRuns.test_lists_runs_pagination (the second page).
write("list_runs_request.json", {"limit": 2, "prev_submitted_at": "2023-01-02 01:04:00+00:00", "prev_run_id": "1b0e1b45-2f8c-4ab6-8010-a0d1a3e44e0b"})
# TestGetFleet.test_not_returns_by_name_if_fleet_does_not_exist.
write("get_fleet_request.json", {"name": "some_fleet"})

# TestApplyFleetPlan.test_creates_ssh_fleet: the Fleet it expects back.
tree = ast.parse(fleets_src)
expected = None
for node in ast.walk(tree):
    if isinstance(node, ast.AsyncFunctionDef) and node.name == "test_creates_ssh_fleet":
        for sub in ast.walk(node):
            if isinstance(sub, ast.Compare) and isinstance(sub.comparators[0], ast.Dict):
                expected = sub.comparators[0]
                break
        break
spec = types.SimpleNamespace(configuration=types.SimpleNamespace(name="test-ssh-fleet"), configuration_path="fleet.dstack.yml")
project = types.SimpleNamespace(name="test_project")
fleet = eval(compile(ast.Expression(body=expected), "test_fleets.py", "eval"), {"SomeUUID4Str": some_uuid, "spec": spec, "project": project})
fleet["instances"][0]["fleet_id"] = fleet["id"]  # the test asserts they are equal
write("fleet_ssh.json", fleet)
