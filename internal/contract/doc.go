// Package contract checks tests' fake vendor APIs against the vendors'
// published API definitions (OpenAPI 3, or Swagger 2.0 converted): every
// request a fake receives and every response it sends is validated, so a
// fake can no longer agree with a wrong adapter. Test code only: adapters'
// tests wrap their fakes' handlers with Checker.Wrap.
package contract
