"""OpenAI-style error bodies: `{"error": {"message", "type", "param", "code"}}` with the status code an
OpenAI client maps to its typed exceptions (400 BadRequestError, 401 AuthenticationError, 404
NotFoundError, 500 InternalServerError)."""

from __future__ import annotations


class APIError(Exception):
    """A request the server refuses; the message says what was wrong and what would be valid."""

    def __init__(self, status: int, message: str, *, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error"):
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    return APIError(400, message, param=param, code=code)


def from_validation(error) -> APIError:
    """A pydantic ValidationError as a 400 naming the first bad field (e.g. `messages.1.role`)."""
    first = error.errors()[0]
    param = ".".join(str(part) for part in first["loc"]) or None
    return bad_request(f"{param or 'body'}: {first['msg']}", param=param)


def install_handlers(app) -> None:
    """Every failure leaves as an OpenAI error body: refused requests, unknown routes, and crashes (as a
    500 whose message names the exception type only, so that nothing internal leaks)."""
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    async def api_error(request, e: APIError):
        return JSONResponse(e.body(), status_code=e.status)

    async def http_error(request, e: HTTPException):
        return JSONResponse(APIError(e.status_code, f"{request.method} {request.url.path}: {e.detail}").body(),
                            status_code=e.status_code)

    async def invalid(request, e: RequestValidationError):
        return await api_error(request, from_validation(e))

    async def crash(request, e: Exception):
        error = APIError(500, f"internal error ({type(e).__name__})", kind="server_error")
        return JSONResponse(error.body(), status_code=500)

    app.add_exception_handler(APIError, api_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(Exception, crash)
