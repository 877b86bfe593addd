// Package apistub holds local stand-ins for the outside APIs the catalog
// adapters speak to: httptest servers that answer like the real service
// (its paths, auth, bodies and errors), record every request, and can be
// switched to fail (401, 404, other 4xx, 429 with or without Retry-After,
// 5xx, a malformed body, a hang, or a closed port). Tests of the adapters
// and the end-to-end tests use them; each stub has an Example: a manifest
// entry pointing at it, one call and the data it gives.
package apistub
