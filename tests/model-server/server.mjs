// A real OpenAI-compatible model server for the AI tests: SmolLM2-135M-Instruct (a GGUF
// file) on node-llama-cpp's prebuilt CPU build. What it answers does not matter; the
// protocol does: `GET /v1/models`, `POST /v1/chat/completions` (a `chat.completion`, or
// server-sent `chat.completion.chunk` events written as the tokens are generated, then
// `data: [DONE]`), a bearer key, a request log the tests read, cancellation when the
// client goes away. Started by scripts/services.sh (`start_model_server`).
//
//   MODEL_PATH=model.gguf [MODEL_API_KEY=k] [MODEL_REQUEST_LOG=requests.jsonl] \
//     node server.mjs [PORT]
//
// Environment:
//   MODEL_PATH         the GGUF file (required)
//   MODEL_PORT         the port when none is given as the argument; 0 (the default) lets
//                      the kernel choose (the address is printed, and written to
//                      MODEL_READY_FILE)
//   MODEL_NAME         the model's id (default SmolLM2-135M-Instruct); another `model` is 404
//   MODEL_API_KEY      when set, every /v1 request needs `Authorization: Bearer <key>` (401)
//   MODEL_REQUEST_LOG  a file to append one JSON line per request but `/health` (`event:
//                      "request"`, a number, method, path, every header, the Authorization
//                      one included, and the whole body: JSON as JSON, else text) and per
//                      event of one (`completed` with its usage, `cancelled`, `rejected`,
//                      `failed`), each naming the request's number
//   MODEL_READY_FILE   a file to write the base URL (`http://127.0.0.1:PORT/v1`) to once
//                      the model is loaded
//   MODEL_THREADS      CPU threads for generation (default 1; see THREADS below)
//
// Listening starts at once; `GET /health` is 503 while the model loads and 200 after, and
// stdout says `ready http://127.0.0.1:PORT/v1`. The model has one context, so one answer
// is generated at a time: others wait in turn (at most MAX_WAITING, then 429), and each
// answer gets a fresh context sequence and chat, disposed after it, so nothing of one
// request reaches the next. Bounds: a body of at most 1 MiB (413), max_tokens capped at
// 512 and at what the 2,048-token context leaves after the prompt (a prompt that fills it
// is 400 `context_length_exceeded`).

import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import {getLlama, LlamaChat, resolveChatWrapper} from "node-llama-cpp";

const MAX_BODY = 1024 * 1024;
const MAX_TOKENS = 512;
const CONTEXT_SIZE = 2048;
const MAX_WAITING = 16;
// llama.cpp's threads wait for each other spinning, so a thread that loses its core stalls
// the rest. Measured on two cores (2026-12-02), a 60-token answer: idle, 1.5-1.8 s with
// one thread and 1.4-1.6 s with two (the model is small; the JS of each token is much of
// the time); beside one busy core, 1.6 s with one and 2.3-5 s with two; beside two, 2.5-3.2 s
// with one and 6-64 s with two. Left to node-llama-cpp, three took over 200 s.
const THREADS = 1;

const modelPath = process.env.MODEL_PATH;
const port = Number(process.argv[2] ?? process.env.MODEL_PORT ?? 0);
const modelName = process.env.MODEL_NAME || "SmolLM2-135M-Instruct";
const apiKey = process.env.MODEL_API_KEY || "";
const requestLog = process.env.MODEL_REQUEST_LOG || "";
const readyFile = process.env.MODEL_READY_FILE || "";
const threads = Number(process.env.MODEL_THREADS || THREADS);

if (!modelPath || !fs.existsSync(modelPath)) {
    console.error(`MODEL_PATH must name the GGUF file (got ${JSON.stringify(modelPath)})`);
    process.exit(2);
}
if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`not a port: ${process.argv[2] ?? process.env.MODEL_PORT}`);
    process.exit(2);
}

/** One JSON line, written whole by a single append, so a reader never sees half of one. */
function record(entry) {
    if (requestLog) fs.appendFileSync(requestLog, JSON.stringify({time: new Date().toISOString(), ...entry}) + "\n");
}

function sendJson(res, status, value, headers = {}) {
    const text = JSON.stringify(value);
    res.writeHead(status, {"content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers});
    res.end(text);
}

/** OpenAI's error shape. */
function sendError(res, status, message, type, code = null, param = null) {
    sendJson(res, status, {error: {message, type, param, code}});
}

/** The body, whole up to MAX_BODY; past it the rest is read and dropped, so the 413 is
 * answered on a connection the client has finished writing to (not reset under it). */
function readBody(req) {
    return new Promise((resolve, reject) => {
        const chunks = [];
        let size = 0;
        req.on("data", (chunk) => {
            size += chunk.length;
            if (size <= MAX_BODY) chunks.push(chunk);
        });
        req.on("end", () => resolve({text: Buffer.concat(chunks).toString("utf8"), size}));
        req.on("error", reject);
    });
}

// The loaded model, its context and chat wrapper (resolved once: "auto" took 0.9 s of the
// event loop for each new LlamaChat); null until then.
let model = null;
let context = null;
let chatWrapper = null;

// One generation at a time: each waits for the one before it.
let turn = Promise.resolve();
let waiting = 0;
function exclusive(work) {
    const run = turn.then(work, work);
    turn = run.catch(() => {});
    return run;
}

let requestCount = 0;

const server = http.createServer((req, res) => {
    handle(req, res).catch((error) => {
        console.error("request failed:", error);
        if (!res.headersSent) sendError(res, 500, `internal error: ${error.message}`, "server_error");
        else res.destroy();
    });
});

async function handle(req, res) {
    const path = new URL(req.url, "http://127.0.0.1").pathname;
    const request = path === "/health" ? 0 : ++requestCount;
    const {text, size} = await readBody(req);
    // A JSON body is logged as JSON, anything else as the text it is.
    let body = text === "" ? null : text;
    let json = false;
    try {
        if (body !== null) [body, json] = [JSON.parse(text), true];
    } catch {
        // not JSON
    }
    const tooLarge = size > MAX_BODY;
    // Every request but the readiness polls.
    if (path !== "/health") record({
        event: "request",
        request,
        method: req.method,
        path: req.url,
        headers: req.headers,
        ...(tooLarge ? {body: null, body_bytes: size} : {body}),
    });
    if (tooLarge) {
        return sendError(res, 413, `The request body is ${size} bytes; at most ${MAX_BODY} are accepted.`, "invalid_request_error");
    }

    if (path === "/health") {
        if (req.method !== "GET") return sendError(res, 405, "Use GET.", "invalid_request_error");
        return model
            ? sendJson(res, 200, {status: "ok", model: modelName})
            : sendJson(res, 503, {status: "loading", model: modelName});
    }
    if (!path.startsWith("/v1/")) {
        return sendError(res, 404, `Unknown request URL: ${req.method} ${path}.`, "invalid_request_error", "unknown_url");
    }
    if (apiKey && req.headers.authorization !== `Bearer ${apiKey}`) {
        record({event: "rejected", request, status: 401});
        const message = req.headers.authorization
            ? "Incorrect API key provided."
            : "You didn't provide an API key (Authorization: Bearer <key>).";
        return sendError(res, 401, message, "invalid_request_error", "invalid_api_key");
    }
    const modelObject = {id: modelName, object: "model", created: 0, owned_by: "karpor-test"};
    if (path === "/v1/models" || path === `/v1/models/${modelName}`) {
        if (req.method !== "GET") return sendError(res, 405, "Use GET.", "invalid_request_error");
        return sendJson(res, 200, path === "/v1/models" ? {object: "list", data: [modelObject]} : modelObject);
    }
    if (path.startsWith("/v1/models/")) {
        return sendError(res, 404, `The model '${path.slice(11)}' does not exist.`, "invalid_request_error", "model_not_found");
    }
    if (path === "/v1/chat/completions") {
        if (req.method !== "POST") return sendError(res, 405, "Use POST.", "invalid_request_error");
        if (!json) return sendError(res, 400, "We could not parse the JSON body of your request.", "invalid_request_error");
        return chatCompletion(res, request, body);
    }
    return sendError(res, 404, `Unknown request URL: ${req.method} ${path}.`, "invalid_request_error", "unknown_url");
}

/** The text of a message's content: a string, or the text parts of an array of parts. */
function contentText(content) {
    if (typeof content === "string") return content;
    if (content == null) return "";
    if (Array.isArray(content)) {
        return content.map((part) => {
            if (part?.type !== "text" || typeof part.text !== "string") throw new Error("only text content parts are supported");
            return part.text;
        }).join("");
    }
    throw new Error("content must be a string or an array of text parts");
}

/** OpenAI's request, checked, as node-llama-cpp's chat history and options; a string is
 * the message of a 400. */
function parseChatRequest(body) {
    if (body === null || typeof body !== "object" || Array.isArray(body)) {
        return "The body must be a JSON object (OpenAI's chat completion request).";
    }
    if (typeof body.model !== "string") return "`model` is required.";
    if (!Array.isArray(body.messages) || body.messages.length === 0) return "`messages` must be a non-empty array.";
    const history = [];
    for (const [i, message] of body.messages.entries()) {
        let text;
        try {
            text = contentText(message?.content);
        } catch (error) {
            return `messages[${i}]: ${error.message}`;
        }
        switch (message?.role) {
            case "system":
            case "developer":
                history.push({type: "system", text});
                break;
            case "user":
                history.push({type: "user", text});
                break;
            case "assistant":
                history.push({type: "model", response: [text]});
                break;
            case "tool":
                history.push({type: "user", text: `Tool result: ${text}`});
                break;
            default:
                return `messages[${i}].role must be system, developer, user, assistant or tool.`;
        }
    }
    history.push({type: "model", response: []}); // the answer to generate

    const requested = body.max_completion_tokens ?? body.max_tokens ?? MAX_TOKENS;
    if (!Number.isInteger(requested) || requested < 1) return "`max_tokens` must be a positive integer.";
    const temperature = body.temperature ?? 1;
    if (typeof temperature !== "number" || temperature < 0 || temperature > 2) return "`temperature` must be between 0 and 2.";
    const topP = body.top_p ?? 1;
    if (typeof topP !== "number" || topP <= 0 || topP > 1) return "`top_p` must be in (0, 1].";
    if (body.seed != null && !Number.isInteger(body.seed)) return "`seed` must be an integer.";
    const stop = body.stop == null ? [] : [body.stop].flat();
    if (stop.length > 4 || stop.some((s) => typeof s !== "string" || s === "")) return "`stop` must be up to 4 non-empty strings.";
    if (body.stream != null && typeof body.stream !== "boolean") return "`stream` must be a boolean.";
    if ((body.n ?? 1) !== 1) return "Only `n: 1` is supported.";
    return {
        history,
        maxTokens: Math.min(requested, MAX_TOKENS),
        options: {temperature, topP, ...(body.seed != null ? {seed: body.seed} : {}), customStopTriggers: stop},
        stream: body.stream === true,
        includeUsage: body.stream_options?.include_usage === true,
    };
}

async function chatCompletion(res, request, body) {
    if (!model) return sendError(res, 503, "The model is still loading.", "server_error", "model_loading");
    const parsed = parseChatRequest(body);
    if (typeof parsed === "string") return sendError(res, 400, parsed, "invalid_request_error");
    if (body.model !== modelName) {
        return sendError(res, 404, `The model \`${body.model}\` does not exist.`, "invalid_request_error", "model_not_found", "model");
    }
    if (waiting >= MAX_WAITING) {
        record({event: "rejected", request, status: 429});
        return sendError(res, 429, `${waiting} requests are already waiting for the model.`, "requests", "rate_limit_exceeded");
    }

    // The client hanging up (before or during the answer) aborts the generation.
    const abort = new AbortController();
    res.on("close", () => {
        if (!res.writableFinished) abort.abort(new Error("the client disconnected"));
    });
    const id = `chatcmpl-${crypto.randomBytes(12).toString("hex")}`;
    const created = Math.floor(Date.now() / 1000);
    waiting++;
    await exclusive(async () => {
        waiting--;
        if (abort.signal.aborted) {
            record({event: "cancelled", request, id, completion_tokens: 0, before_start: true});
            console.log(`request ${request} ${id}: cancelled (the client left while it waited)`);
            return;
        }
        await generate(res, request, parsed, abort.signal, id, created);
    });
}

async function generate(res, request, parsed, signal, id, created) {
    const sequence = context.getSequence();
    const chat = new LlamaChat({contextSequence: sequence, chatWrapper});
    const started = Date.now();
    let completionTokens = 0;
    let streaming = false;
    const chunk = (delta, finishReason) => ({
        id, object: "chat.completion.chunk", created, model: modelName,
        choices: [{index: 0, delta, logprobs: null, finish_reason: finishReason}],
        ...(parsed.includeUsage ? {usage: null} : {}),
    });
    const event = (value) => {
        if (!res.destroyed && !res.writableEnded) res.write(`data: ${JSON.stringify(value)}\n\n`);
    };
    try {
        const promptTokens = chat.chatWrapper.generateContextState({chatHistory: parsed.history})
            .contextText.tokenize(model.tokenizer).length;
        if (promptTokens >= CONTEXT_SIZE) {
            record({event: "rejected", request, status: 400, prompt_tokens: promptTokens});
            return sendError(res, 400, `The prompt is ${promptTokens} tokens; the context holds ${CONTEXT_SIZE}.`,
                "invalid_request_error", "context_length_exceeded", "messages");
        }
        if (parsed.stream) {
            res.writeHead(200, {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", connection: "keep-alive"});
            res.flushHeaders();
            streaming = true;
            event(chunk({role: "assistant", content: ""}, null));
        }
        let result;
        try {
            result = await chat.generateResponse(parsed.history, {
                ...parsed.options,
                maxTokens: Math.min(parsed.maxTokens, CONTEXT_SIZE - promptTokens),
                signal,
                stopOnAbortSignal: true,
                onToken: (tokens) => {
                    completionTokens += tokens.length;
                },
                onTextChunk: (text) => {
                    if (parsed.stream && text !== "") event(chunk({content: text}, null));
                },
            });
        } catch (error) {
            if (!signal.aborted) throw error; // aborted before the first token: not an error
        }
        if (signal.aborted) {
            record({event: "cancelled", request, id, completion_tokens: completionTokens});
            console.log(`request ${request} ${id}: the client disconnected after ${completionTokens} tokens; generation cancelled`);
            return;
        }
        const finishReason = result.metadata.stopReason === "maxTokens" ? "length" : "stop";
        const usage = {prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens};
        const ms = Date.now() - started;
        record({event: "completed", request, id, finish_reason: finishReason, usage, ms});
        console.log(`request ${request} ${id}: ${completionTokens} tokens in ${ms} ms (${finishReason})`);
        if (parsed.stream) {
            event(chunk({}, finishReason));
            if (parsed.includeUsage) event({id, object: "chat.completion.chunk", created, model: modelName, choices: [], usage});
            res.end("data: [DONE]\n\n");
        } else {
            sendJson(res, 200, {
                id, object: "chat.completion", created, model: modelName,
                choices: [{index: 0, message: {role: "assistant", content: result.response, refusal: null}, logprobs: null, finish_reason: finishReason}],
                usage,
            });
        }
    } catch (error) {
        record({event: "failed", request, id, error: String(error?.message ?? error)});
        if (!streaming) throw error;
        // Headers are sent: the error goes in the stream, as OpenAI's do.
        console.error(`request ${request} ${id} failed:`, error);
        event({error: {message: String(error?.message ?? error), type: "server_error", param: null, code: null}});
        res.end();
    } finally {
        chat.dispose();
        await sequence.dispose();
    }
}

for (const signal of ["SIGTERM", "SIGINT"]) {
    process.on(signal, () => {
        console.log(`${signal}: stopping`);
        process.exit(0);
    });
}

server.listen(port, "127.0.0.1", async () => {
    const base = `http://127.0.0.1:${server.address().port}`;
    console.log(`listening on ${base}; loading ${modelPath}`);
    try {
        const started = Date.now();
        const llama = await getLlama({gpu: false, build: "never", logLevel: "warn"});
        const loaded = await llama.loadModel({modelPath});
        context = await loaded.createContext({contextSize: CONTEXT_SIZE, threads});
        chatWrapper = resolveChatWrapper(loaded);
        model = loaded;
        console.log(`model ${modelName} loaded in ${Date.now() - started} ms ` +
            `(${threads} thread(s), ${chatWrapper.constructor.name})`);
    } catch (error) {
        console.error("cannot load the model:", error);
        process.exit(1);
    }
    if (readyFile) fs.writeFileSync(readyFile, `${base}/v1\n`);
    console.log(`ready ${base}/v1`);
});
