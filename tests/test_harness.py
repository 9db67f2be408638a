"""The harness as data: loading, overrides, strict sandboxed templates, and each action format's parser
and renderer. Every bad input must give an error that names the file and the field or line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from coevo.harness import FormatError, HarnessError, ToolCall, load_harness, parse_action, render_action
from coevo.harness.prompts import observation_text, system_prompt
from coevo.harness.tools import ToolResult, truncate

REPO = Path(__file__).resolve().parents[1]
BASES = sorted(p.stem for p in (REPO / "harnesses").glob("*.yaml"))


def base(name: str):
    return load_harness(REPO / "harnesses" / f"{name}.yaml")


@pytest.fixture
def workspace(tmp_path):
    """A harnesses/ + prompts/ pair to break on purpose."""
    shutil.copytree(REPO / "prompts", tmp_path / "prompts")
    (tmp_path / "harnesses").mkdir()
    return tmp_path


def write(workspace: Path, yaml_text: str, name: str = "h") -> Path:
    path = workspace / "harnesses" / f"{name}.yaml"
    path.write_text(yaml_text)
    return path


# -- the shipped harnesses -------------------------------------------------------------------------
def test_at_least_three_bases_that_differ_in_format():
    harnesses = [base(n) for n in BASES]
    assert len(harnesses) >= 3
    assert {h.action_format.kind for h in harnesses} == {"json", "tool_call", "bash_block"}
    assert all(h.name == n for h, n in zip(harnesses, BASES))


@pytest.mark.parametrize("name", BASES)
@pytest.mark.parametrize("system", sorted(p.name for p in (REPO / "prompts").glob("system_*.j2")))
def test_every_system_template_fits_every_base_and_stays_short(name, system):
    h = base(name).with_overrides({"templates.system": system})
    prompt = system_prompt(h)
    assert render_action(h, ["ls -la"], submit=False) in prompt
    assert len(prompt) < 700  # the default model has a context of ~2k tokens


# -- overrides -------------------------------------------------------------------------------------
def test_with_overrides_returns_a_new_validated_harness():
    h = base("terminus_json")
    new = h.with_overrides({"recovery.max_format_retries": 3, "templates.system": "system_terse.j2",
                            "context.history": "last_k", "context.k": 2})
    assert (new.recovery.max_format_retries, new.templates.system, new.context.history) == (3, "system_terse.j2", "last_k")
    assert h.recovery.max_format_retries != 3 or h.templates.system != "system_terse.j2"
    assert new.limits == h.limits


@pytest.mark.parametrize(("overrides", "message"), [
    ({"recovery.max_retries": 1}, r"unknown field 'recovery.max_retries' \(valid: format_error_feedback, max"),
    ({"limitz.max_turns": 1}, r"unknown field 'limitz' \(valid: name, .*limits"),
    ({"limits.max_turns.x": 1}, r"'limits.max_turns.x': 'limits.max_turns' is not a section \(sections: none"),
    ({"tools.bash.x": 1}, r"overrides: unknown field 'tools.bash.x' \(valid: enabled, description"),
    ({"limits.max_turns": "many"}, r"field 'limits.max_turns': Input should be a valid integer.*'many'"),
    ({"limits.max_turns": 0}, r"field 'limits.max_turns': Input should be greater than or equal to 1"),
    ({"action_format.kind": "xml"}, r"field 'action_format.kind': Input should be 'json', 'tool_call' or 'bash"),
    ({"templates.system": "nope.j2"}, r"nope.j2: template not found.*templates there: .*system_terse.j2"),
    ({"action_format.kind": "bash_block", "tools.read_file.enabled": True},
     r"'bash_block' can express only the bash and submit tools.*disable read_file"),
])
def test_bad_overrides_name_the_path_and_what_is_valid(overrides, message):
    with pytest.raises(HarnessError, match=message):
        base("terminus_json").with_overrides(overrides)


def test_to_yaml_round_trips(tmp_path):
    h = base("qwen_tools").with_overrides({"decoding.temperature": 0.5})
    path = tmp_path / "exported.yaml"
    path.write_text(h.to_yaml())
    assert load_harness(path) == h


# -- loading errors --------------------------------------------------------------------------------
@pytest.mark.parametrize(("text", "message"), [
    ("limits:\n  max_turns: [1\n", r"h.yaml:\d+: invalid YAML"),
    ("limits:\n  max_turnz: 3\n", r"h.yaml: unknown field 'limits.max_turnz' \(valid: max_turns, "),
    ("colour: blue\n", r"h.yaml: unknown field 'colour' \(valid: name, description, prompts_dir, templates"),
    ("limits: 3\n", r"h.yaml: field 'limits': Input should be a valid dictionary"),
    ("recovery:\n  timeout_notice: maybe\n", r"field 'recovery.timeout_notice': Input should be a valid boolean"),
    ("- a\n- b\n", r"h.yaml: a harness file must be a YAML mapping \(valid keys: name, "),
])
def test_bad_yaml_names_the_file_and_field(workspace, text, message):
    with pytest.raises(HarnessError, match=message):
        load_harness(write(workspace, text))


def test_missing_file_is_named(tmp_path):
    with pytest.raises(HarnessError, match=r"nothere.yaml: cannot read harness file"):
        load_harness(tmp_path / "nothere.yaml")


def test_prompts_dir_resolves_next_to_harnesses_or_as_set(workspace, tmp_path):
    assert load_harness(write(workspace, "{}")).prompts_path == (workspace / "prompts").resolve()
    other = tmp_path / "other"
    shutil.copytree(workspace / "prompts", other)
    assert load_harness(write(workspace, "prompts_dir: ../other\n")).prompts_path == other.resolve()


# -- template errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(("template", "message"), [
    ("Hello\n{% if x %}\n", r"bad.j2:2: template syntax error: Unexpected end of template"),
    ("Hi\n\n{{ exmple }}\n", r"bad.j2:3: 'exmple' is undefined \(variables available: action_format, example, "),
    ("{{ example.__class__ }}\n", r"bad.j2:1: not allowed in a sandboxed template: access to attribute '__class__'"),
    ("{{ tools.__class__.__mro__ }}", r"bad.j2:1: not allowed in a sandboxed template"),
])
def test_template_errors_name_file_line_and_variables(workspace, template, message):
    (workspace / "prompts" / "bad.j2").write_text(template)
    with pytest.raises(HarnessError, match=message):
        load_harness(write(workspace, "templates:\n  system: bad.j2\n"))


def test_observation_template_typo_is_caught_at_load_time(workspace):
    (workspace / "prompts" / "obs.j2").write_text("{{ output }}\n{{ exitcode }}\n")
    with pytest.raises(HarnessError, match=r"obs.j2:2: 'exitcode' is undefined .*exit_code, output"):
        load_harness(write(workspace, "templates:\n  observation: obs.j2\n"))


# -- action formats --------------------------------------------------------------------------------
COMMANDS = [["ls -la"], ["cd /app", "grep -c 'a \"b\"' x.txt > out.txt"], ["printf 'a\\nb\\n' | sort -u"],
            ["for f in *.txt; do\n  echo \"$f\"\ndone"]]


@pytest.mark.parametrize("name", BASES)
@pytest.mark.parametrize("commands", COMMANDS)
@pytest.mark.parametrize("submit", [False, True])
def test_render_then_parse_round_trips(name, commands, submit):
    h = base(name)
    calls = parse_action(h, render_action(h, commands, submit))
    if h.action_format.kind == "bash_block":  # one block: the commands run as one script
        expected = [ToolCall(name="bash", arguments={"command": "\n".join(commands)})]
    else:
        expected = [ToolCall(name="bash", arguments={"command": c}) for c in commands]
    assert calls == expected + [ToolCall(name="submit")] * submit


@pytest.mark.parametrize("name", BASES)
def test_submit_alone_round_trips(name):
    h = base(name)
    assert parse_action(h, render_action(h, [], submit=True)) == [ToolCall(name="submit")]
    with pytest.raises(ValueError):
        render_action(h, [], submit=False)


def test_json_accepts_terminus_replies_with_prose_around():
    reply = ('Sure.\n```json\n{"analysis": "empty dir", "plan": "make it", "commands": '
             '[{"keystrokes": "touch a\\n", "duration": 0.1}, {"command": "ls"}], "task_complete": false}\n```')
    assert [c.arguments["command"] for c in parse_action(base("terminus_json"), reply)] == ["touch a", "ls"]


def test_tool_call_accepts_string_arguments_and_stops_at_submit():
    reply = ('<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
             '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'
             '<tool_call>{"name": "bash", "arguments": {"command": "rm -rf /app"}}</tool_call>')
    assert [c.name for c in parse_action(base("qwen_tools"), reply)] == ["bash", "submit"]


@pytest.mark.parametrize(("name", "reply", "message"), [
    ("terminus_json", "I will list files.", "No JSON object found"),
    ("terminus_json", '{"commands": [', r"Invalid JSON: .*\(line 1, column"),
    ("terminus_json", '{"commands": "ls"}', '"commands" must be a list'),
    ("terminus_json", '{"commands": [{"cmd": "ls"}]}', r'commands\[0\] must be an object with "keystrokes"'),
    ("terminus_json", '{"commands": [], "task_complete": false}', "give at least one command"),
    ("terminus_json", '{"commands": [{"tool": "read_file", "path": "a"}]}', "Available tools: bash, submit"),
    ("qwen_tools", "ls -la", "No tool call found"),
    ("qwen_tools", '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}', r"a <tool_call> is not closed"),
    ("qwen_tools", "<tool_call>{name: bash}</tool_call>", r"Tool call 1: invalid JSON"),
    ("qwen_tools", '<tool_call>{"name": "python", "arguments": {}}</tool_call>', "Unknown tool 'python'"),
    ("qwen_tools", '<tool_call>{"name": "bash", "arguments": {"cmd": "ls"}}</tool_call>',
     "Tool 'bash' takes command; got cmd"),
    ("qwen_tools", '<tool_call>{"name": "bash", "arguments": {"command": 3}}</tool_call>', "must be a string"),
    ("qwen_tools", '<tool_call>["bash"]</tool_call>', r'must be \{"name": <tool>'),
    ("mini_bash", "ls -la", r"Found 0 ```bash blocks; reply with exactly one"),
    ("mini_bash", "```bash\nls\n```\n```bash\npwd\n```", "Found 2 ```bash blocks"),
    ("mini_bash", "```bash\n\n```", "The ```bash block is empty"),
])
def test_format_errors_carry_a_message_for_the_model(name, reply, message):
    with pytest.raises(FormatError, match=message):
        parse_action(base(name), reply)


def test_disabled_tool_is_refused():
    h = base("qwen_tools").with_overrides({"tools.write_file.enabled": False})
    reply = '<tool_call>{"name": "write_file", "arguments": {"path": "a", "content": "b"}}</tool_call>'
    with pytest.raises(FormatError, match="Unknown tool 'write_file'. Available tools: bash, read_file, submit"):
        parse_action(h, reply)
    assert "write_file" not in system_prompt(h)


# -- observations ----------------------------------------------------------------------------------
def test_truncate_keeps_head_and_tail():
    text = "".join(f"{i:04d}\n" for i in range(1000))
    cut = truncate(text, 50, 30)
    assert cut.startswith(text[:50]) and cut.endswith(text[-30:]) and "[... 4920 characters omitted ...]" in cut
    assert truncate("short", 50, 30) == "short"


def test_recovery_hints_follow_the_policy():
    h = base("terminus_json")
    failed = ToolResult(tool="bash", command="false", output="", exit_code=1)
    killed = ToolResult(tool="bash", command="sleep 9", output="", exit_code=None, timed_out=True)
    assert "failed (exit code 1)" not in observation_text(h, failed)
    assert "failed (exit code 1)" in observation_text(h.with_overrides({"recovery.nonzero_exit_hint": True}), failed)
    assert "was killed" in observation_text(h, killed)
    assert "was killed" not in observation_text(h.with_overrides({"recovery.timeout_notice": False}), killed)
