import logging
import time
from urllib.parse import parse_qs

from django.http import HttpResponse

from . import runtime

log = logging.getLogger("testhooks")


class TestHooksMiddleware:
    """Counts requests per endpoint (token requests also per grant_type), keeps the trace headers
    (traceparent, X-Request-Id) of those that carry them, and injects faults.

    Runs before everything else, so a request is counted on arrival, even when the view later
    fails or a fault replaces the answer.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        runtime.current.request = request
        try:
            return self._handle(request)
        finally:
            runtime.current.request = None

    def _handle(self, request):
        endpoint = runtime.ENDPOINTS.get(request.path)
        if endpoint is None:
            return self.get_response(request)
        grant_type = None
        if endpoint == "token" and request.method == "POST":
            # Read the raw body (cached by Django) rather than request.POST, so the view can
            # still read it however it likes.
            body = request.body.decode("utf-8", "replace")
            grant_type = (parse_qs(body).get("grant_type") or [None])[0]
        if endpoint != "token" or request.method == "POST":
            runtime.count(endpoint, grant_type)
        traceparent, request_id = request.META.get("HTTP_TRACEPARENT"), request.META.get("HTTP_X_REQUEST_ID")
        if traceparent or request_id:
            runtime.record_trace(endpoint, traceparent, request_id)
        fault = runtime.take_fault(endpoint)
        if fault:
            log.info("injecting fault on %s: status=%s delay=%s", endpoint, fault["status"], fault["delay"])
            if fault["delay"]:
                time.sleep(fault["delay"])
            if fault["status"] is not None:
                resp = HttpResponse(fault["body"], status=fault["status"], content_type=fault["content_type"])
                resp["Cache-Control"] = "no-store"
                return resp
        if endpoint in runtime.SERIALISED_ENDPOINTS:
            with runtime.token_lock:
                return self.get_response(request)
        return self.get_response(request)
