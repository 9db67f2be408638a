"""Constrained action decoding (`action_format.constrained`): each action format as an xgrammar EBNF
grammar whose every sentence `parse_action` turns into valid tool calls, and the machinery that applies
it while sampling (one GrammarMatcher per row, one token bitmask per step) or replays it afterwards.

The grammars are tighter than the parsers, on purpose: a 135M model acts when the only thing it may
write is an action, in the exact shape of the system prompt's example.

    bash_block  "```bash\\n" + lines + "```"; each line starts with a printable ASCII character that is
                not a space, '#' (comments, "#!/bin/bash") or a backtick; no backtick anywhere (it would
                end the block early); the submit command may be the last line, or the only one
    json        {"commands": [{"keystrokes": "..."}, ...], "task_complete": false|true} with json.dumps'
                spacing, no analysis/plan; at least one command unless task_complete is true
    tool_call   exactly one <tool_call>{"name": ..., "arguments": {...}}</tool_call> per reply, for the
                enabled tools' schemas (coevo.harness.tools.tool_schemas), strings never holding "</"

Commands never start with a space, '#', a quote or a backslash, and JSON strings use only the escapes
\\" \\\\ \\/ \\n \\t (no \\u: a lone surrogate could not be saved). The reply ends right after the action:
the grammar then allows only the stop token.

xgrammar is imported only when a grammar is compiled (harness check, policies, mismatch replay).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from coevo.harness.tools import enabled_tools, tool_schemas

if TYPE_CHECKING:
    from coevo.harness.spec import HarnessSpec

FIELD = "action_format.constrained"

# Printable ASCII but space, '"', '#', '\\' (and '`' / '<' where noted): how a command may start.
_JSON_FIRST = r'[!$-\x5b\x5d-~]'
_JSON_CHAR = r'[^"\\\x00-\x1f]'
_ESC = r'"\\" ["\\/nt]'
_RULES_JSON = f"""
jchar ::= {_JSON_CHAR} | {_ESC}
cmd ::= {_JSON_FIRST} jchar*
nonblank ::= {_JSON_FIRST} jchar*
text ::= jchar*
"""
# tool_call: the parser cuts a call at the first "</tool_call>", so no string may hold "</".
_RULES_TAGGED = f"""
tchar ::= [^"\\\\<\\x00-\\x1f] | {_ESC} | "<"+ ([^"\\\\</\\x00-\\x1f] | {_ESC})
cmd ::= [!$-;=-\\x5b\\x5d-~] tchar* "<"*
nonblank ::= [!$-;=-\\x5b\\x5d-~] tchar* "<"*
text ::= tchar* "<"*
"""
_STRING_RULE = {"command": "cmd", "path": "nonblank"}
"""Parameters whose value must hold something; the others (a file's content) may be any string."""


def lit(s: str) -> str:
    """`s` as an EBNF string literal."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        elif ch in "\n\t":
            out.append("\\n" if ch == "\n" else "\\t")
        else:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) < 0x10000 else f"\\U{ord(ch):08x}")
    return '"' + "".join(out) + '"'


def action_grammar(harness: HarnessSpec) -> str:
    """The EBNF grammar (root rule `root`) of the harness's action format and enabled tools."""
    kind = harness.action_format.kind
    submit = harness.tools.submit.enabled
    if kind == "bash_block":
        body = "line+ submit? | submit" if submit else "line+"
        return "\n".join([
            'root ::= "```bash\\n" body "```"',
            f"body ::= {body}",
            'line ::= [!"$-_a-~] [^`\\n\\r]* "\\n"',
            f'submit ::= {lit(harness.action_format.submit_command + chr(10))}',
        ])
    if kind == "json":
        items = []
        for schema in tool_schemas(harness):
            fn = schema["function"]
            if fn["name"] == "bash":
                items.append('"{\\"keystrokes\\": \\"" cmd "\\"}"')
            elif fn["name"] != "submit":
                items.append(f'"{{\\"tool\\": \\"{fn["name"]}\\"" {_args(fn, ", ")} "}}"')
        alts = []
        if items:
            alts.append('"{\\"commands\\": [" items "], \\"task_complete\\": false}"')
        if submit:
            alts.append('"{\\"commands\\": [" ' + ("items? " if items else "") + '"], \\"task_complete\\": true}"')
        rules = [f"root ::= {' | '.join(alts)}"]
        if items:
            rules += ['items ::= item (", " item)*', f"item ::= {' | '.join(items)}"]
        return "\n".join(rules) + _RULES_JSON
    calls = [f'"{{\\"name\\": \\"{s["function"]["name"]}\\", \\"arguments\\": {{" '
             f'{_args(s["function"], "")} "}}}}"' for s in tool_schemas(harness)]
    return "\n".join(['root ::= "<tool_call>\\n" call "\\n</tool_call>"',
                      f"call ::= {' | '.join(calls)}"]) + _RULES_TAGGED


def _args(fn: dict, lead: str) -> str:
    """A tool's parameters as `"name": "<value>"` pairs, in its schema's order; `lead` goes before the
    first pair (the json format's items continue an object that already holds "tool")."""
    parts = [f'"{lead if i == 0 else ", "}\\"{p}\\": \\"" {_STRING_RULE.get(p, "text")} "\\""'
             for i, p in enumerate(fn["parameters"]["properties"])]
    return " ".join(parts) or '""'


def check_grammar(harness: HarnessSpec) -> None:
    """Compile the harness's grammar (against a byte vocabulary) and check that it accepts the system
    prompt's own examples, and that they parse: a ValueError naming `action_format.constrained` if not."""
    from coevo.harness.formats import parse_action, render_action

    fmt = harness.action_format
    if fmt.kind == "bash_block" and ("`" in fmt.submit_command or fmt.submit_command.strip() != fmt.submit_command
                                     or "\n" in fmt.submit_command or not fmt.submit_command):
        raise ValueError(f"{FIELD}: action_format.submit_command {fmt.submit_command!r} cannot be the last line of "
                         "a ```bash block under a grammar: give one line, no backticks, no surrounding spaces")
    try:
        compiled = compile_bytes(action_grammar(harness))
    except RuntimeError as e:
        raise ValueError(f"{FIELD}: the grammar of action format '{fmt.kind}' does not compile: {e}") from None
    examples = []
    if "bash" in enabled_tools(harness):
        examples.append(render_action(harness, ["ls -la"], submit=False))
    if harness.tools.submit.enabled:
        examples.append(render_action(harness, [], submit=True))
    for text in examples:
        parse_action(harness, text)
        if not accepts(compiled, text.encode()):
            raise ValueError(f"{FIELD}: the grammar of action format '{fmt.kind}' rejects the system prompt's "
                             f"example {text!r}; the grammar and the format disagree")


@functools.lru_cache(maxsize=16)
def compile_bytes(grammar: str):
    import xgrammar as xgr

    info = xgr.TokenizerInfo([bytes([i]) for i in range(256)] + [b"</s>"], stop_token_ids=[256])
    return xgr.GrammarCompiler(info, max_threads=1).compile_grammar(grammar)


def accepts(compiled, data: bytes) -> bool:
    """Whether `data` (one byte per token, the byte vocabulary of `compile_bytes`) is a whole sentence."""
    import xgrammar as xgr

    m = xgr.GrammarMatcher(compiled)
    return all(m.accept_token(b) for b in data) and m.accept_token(256) and m.is_terminated()


# -- a model's vocabulary ---------------------------------------------------------------------------
@functools.lru_cache(maxsize=8)
def _compiler(tokenizer, vocab_size: int):
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab_size)
    return xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True)


@functools.lru_cache(maxsize=32)
def compile_for(tokenizer, vocab_size: int, grammar: str):
    """The grammar compiled against a tokenizer whose model has `vocab_size` logits (SmolLM2's config says
    49152; what the tokenizer holds may be fewer): cached per (tokenizer, vocab size, grammar text)."""
    return _compiler(tokenizer, vocab_size).compile_grammar(grammar)


class RowMatchers:
    """One GrammarMatcher per row of a batch, all on one compiled grammar, ending only on `stop_id`.

    `mask(logits, rows)` writes each listed row's allowed tokens into one (B, vocab/32) bitmask and sets the
    others' logits to -inf in place (rows not listed are left alone: they have stopped); `accept(row, token)`
    advances a row after its token was sampled."""

    def __init__(self, compiled, n_rows: int, stop_id: int, vocab_size: int):
        import xgrammar as xgr

        self.matchers = [xgr.GrammarMatcher(compiled, override_stop_tokens=[stop_id]) for _ in range(n_rows)]
        self.bitmask = xgr.allocate_token_bitmask(n_rows, vocab_size)
        self.vocab_size = vocab_size

    def mask(self, logits, rows: list[int]) -> None:
        import xgrammar as xgr

        self.bitmask.fill_(-1)
        for i in rows:
            if not self.matchers[i].is_terminated():
                self.matchers[i].fill_next_token_bitmask(self.bitmask, i)
        xgr.apply_token_bitmask_inplace(logits, self.bitmask.to(logits.device), vocab_size=self.vocab_size)

    def accept(self, row: int, token: int) -> None:
        m = self.matchers[row]
        if not m.is_terminated() and not m.accept_token(token):
            raise RuntimeError(f"row {row}: token {token} was sampled against its grammar mask")


def replay_bitmask(compiled, tokens: list[int], stop_id: int, vocab_size: int):
    """The bitmask each of a reply's tokens was sampled under, (len(tokens), vocab/32): the matcher is
    deterministic given the tokens, so a training forward can apply the same masks afterwards."""
    import xgrammar as xgr

    m = xgr.GrammarMatcher(compiled, override_stop_tokens=[stop_id])
    bitmask = xgr.allocate_token_bitmask(max(1, len(tokens)), vocab_size)
    for i, t in enumerate(tokens):
        m.fill_next_token_bitmask(bitmask, i)
        if not m.accept_token(t):
            raise ValueError(f"token {i} ({t}) is outside the grammar: the reply was not sampled under it")
    return bitmask[: len(tokens)]
