"""The REST API v1 as a plain FastAPI app over `Memory` (no Ray here): routes hold no
logic, `errors.error_response` maps every exception to a status code in one place, and
`memray.serve` mounts the same app as a Ray Serve ingress."""
