"""A dual-era MCP stdio server on the real Python SDK (`mcp` 2.3.0) with the tools, resources and
prompts that the official conformance suite's server scenarios call by name.

mcpsum's conformance test (`tests/it/conformance.rs`) runs the suite against it twice: directly
(supergateway -> this server) and through `mcpsum proxy`, and compares the scores. Everything
here is plain SDK usage, so the direct score is what the SDK itself achieves; a scenario that
scores lower through the proxy is a proxy gap.

Run with the SDK's venv interpreter (`target/test-deps/venv/bin/python3`):

    python3 conformance_server.py              # both eras (`initialize` and `server/discover`)
    python3 conformance_server.py --legacy-only  # refuses `server/discover`: locks as legacy
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
from typing import Any

import mcp.types as types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import UserMessage

# A 1x1 transparent PNG and a tiny silent WAV: small valid media for the content checks.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABh6FO1AAAAABJRU5ErkJggg=="
)
WAV_SILENT = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAIA+AAACABAAZGF0YQIAAAAAAA=="

server: MCPServer[Any] = MCPServer(name="mcpsum-conformance-server", version="1.0.0")

# ----- tools --------------------------------------------------------------------------------


@server.tool(description="Tests simple text content response")
def test_simple_text() -> str:
    return "This is a simple text response for testing."


@server.tool(description="Tests image content response")
def test_image_content() -> list[types.ContentBlock]:
    return [types.ImageContent(type="image", data=PNG_1X1, mime_type="image/png")]


@server.tool(description="Tests audio content response")
def test_audio_content() -> list[types.ContentBlock]:
    return [types.AudioContent(type="audio", data=WAV_SILENT, mime_type="audio/wav")]


def _text_resource(uri: str, mime: str, text: str) -> types.EmbeddedResource:
    return types.EmbeddedResource(
        type="resource",
        resource=types.TextResourceContents(uri=uri, mime_type=mime, text=text),
    )


@server.tool(description="Tests embedded resource content response")
def test_embedded_resource() -> list[types.ContentBlock]:
    return [_text_resource("test://embedded-resource", "text/plain", "This is an embedded resource content.")]


@server.tool(description="Tests response with multiple content types (text, image, resource)")
def test_multiple_content_types() -> list[types.ContentBlock]:
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        types.ImageContent(type="image", data=PNG_1X1, mime_type="image/png"),
        _text_resource(
            "test://mixed-content-resource",
            "application/json",
            json.dumps({"test": "data", "value": 123}),
        ),
    ]


@server.tool(description="Tests tool that emits log messages during execution")
async def test_tool_with_logging(ctx: Context) -> str:
    for text in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await ctx.info(text)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@server.tool(description="Tests tool that reports progress notifications")
async def test_tool_with_progress(ctx: Context) -> str:
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        await asyncio.sleep(0.05)
    return "Tool with progress executed successfully"


@server.tool(description="Tests error response handling")
def test_error_handling() -> str:
    raise RuntimeError("This tool intentionally returns an error for testing")


@server.tool(description="Tests server-initiated sampling (LLM completion request)")
async def test_sampling(prompt: str, ctx: Context) -> str:
    result = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    text = content.text if isinstance(content, types.TextContent) else "No response"
    return f"LLM response: {text}"


async def _elicit(ctx: Context, message: str, schema: dict[str, Any]) -> str:
    result = await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
    return f"action={result.action}, content={json.dumps(result.content or {})}"


@server.tool(description="Tests server-initiated elicitation (user input request)")
async def test_elicitation(message: str, ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {"response": {"type": "string", "description": "User's response"}},
        "required": ["response"],
    }
    return "User response: " + await _elicit(ctx, message, schema)


@server.tool(description="Tests elicitation with default values (SEP-1034)")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {
                "type": "string",
                "description": "User status",
                "enum": ["active", "inactive", "pending"],
                "default": "active",
            },
            "verified": {"type": "boolean", "description": "Verification status", "default": True},
        },
        "required": [],
    }
    return "Elicitation completed: " + await _elicit(ctx, "Please review the form fields", schema)


@server.tool(description="Tests elicitation with the enum schema variants (SEP-1330)")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    choices = [{"const": f"value{i}", "title": f"Choice {i}"} for i in (1, 2, 3)]
    schema = {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": choices},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {
                "type": "array",
                "minItems": 1,
                "maxItems": 3,
                "items": {"type": "string", "enum": ["option1", "option2", "option3"]},
            },
            "titledMulti": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"anyOf": choices}},
        },
        "required": [],
    }
    return "Elicitation completed: " + await _elicit(ctx, "Please select options", schema)


# ----- input-required results (2026-07-28): the questions ride the result, the answers the retry


def _answer(ctx: Context, key: str) -> Any:
    responses = ctx.input_responses or {}
    return responses.get(key)


@server.tool(description="Asks the client's user for a name in an input-required result")
def test_input_required_result_elicitation(ctx: Context) -> types.InputRequiredResult | str:
    answer = _answer(ctx, "user_name")
    if answer is None:
        schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
        ask = types.ElicitRequest(
            method="elicitation/create",
            params=types.ElicitRequestFormParams(message="What is your name?", requested_schema=schema),
        )
        return types.InputRequiredResult(input_requests={"user_name": ask})
    content = getattr(answer, "content", None) or {}
    return f"Hello, {content.get('name', 'unknown')}!"


@server.tool(description="Asks the client's LLM a question in an input-required result")
def test_input_required_result_sampling(ctx: Context) -> types.InputRequiredResult | str:
    answer = _answer(ctx, "capital_question")
    if answer is None:
        question = types.TextContent(type="text", text="What is the capital of France?")
        ask = types.CreateMessageRequest(
            method="sampling/createMessage",
            params=types.CreateMessageRequestParams(
                messages=[types.SamplingMessage(role="user", content=question)], max_tokens=100
            ),
        )
        return types.InputRequiredResult(input_requests={"capital_question": ask})
    content = getattr(answer, "content", None)
    return f"The model said: {getattr(content, 'text', '')}"


@server.tool(description="Asks for the client's roots in an input-required result")
def test_input_required_result_list_roots(ctx: Context) -> types.InputRequiredResult | str:
    answer = _answer(ctx, "client_roots")
    if answer is None:
        ask = types.ListRootsRequest(method="roots/list")
        return types.InputRequiredResult(input_requests={"client_roots": ask})
    roots = [str(r.uri) for r in getattr(answer, "roots", [])]
    return "Client roots: " + ", ".join(roots)


# ----- resources ----------------------------------------------------------------------------


@server.resource("test://static-text", name="static-text", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG_1X1)


@server.resource("test://template/{id}/data", name="template", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    return "Watched resource content"


# ----- prompts ------------------------------------------------------------------------------


@server.prompt(description="A simple prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with required arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt that includes an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[UserMessage]:
    return [
        UserMessage(content=_text_resource(resourceUri, "text/plain", "Embedded resource content for testing.")),
        UserMessage(content="Please process the embedded resource above."),
    ]


@server.prompt(description="A prompt that includes image content")
def test_prompt_with_image() -> list[UserMessage]:
    return [
        UserMessage(content=types.ImageContent(type="image", data=PNG_1X1, mime_type="image/png")),
        UserMessage(content="Please analyze the image above."),
    ]


# ----- completion, logging, subscriptions ---------------------------------------------------


@server.completion()
async def complete(ref: Any, argument: types.CompletionArgument, context: Any) -> types.Completion:
    return types.Completion(values=[], total=0, has_more=False)


async def _set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def _subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


async def _unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    return types.EmptyResult()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--legacy-only",
        action="store_true",
        help="refuse `server/discover`, so the server speaks (and locks as) the legacy era only",
    )
    args = parser.parse_args()
    low = server._lowlevel_server
    low.add_request_handler("logging/setLevel", types.SetLevelRequestParams, _set_level)
    low.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
    low.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)
    if args.legacy_only:
        # Without a handler the SDK answers `server/discover` with "method not found", the
        # answer of a server that predates 2026-07-28.
        low._request_handlers.pop("server/discover", None)
    server.run("stdio")


if __name__ == "__main__":
    main()
