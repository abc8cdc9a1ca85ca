// Package confkit is what a provider's section of courier.yaml is made of,
// so that the provider's package owns the section (its Config type, its
// defaults, its checks) without importing internal/config, as a mautrix
// bridgev2 connector owns its config. It imports only schema and yaml.
//
//   - Section is the contract a provider's Config meets: Defaults fills in
//     what the file left out, Check reports what is wrong. A Config may
//     also be a Normalizer (it rewrites what it was given before the
//     defaults: email's upstream flat keys) and an EmbeddedDefaulter (what
//     it is when the workspace has no config file at all).
//   - Checker is how Check reports: each error at its dotted key
//     ("courier.adapters.email.accounts[0].smtp.port") and that key's line.
//     A section's checker takes keys relative to the section.
//   - Secret is a credential: it never prints. A field of type Secret with
//     YAML key x and, beside it, a string field with key x_file are all a
//     credential needs: internal/config finds every such field by
//     reflection, with its whole dotted path, reads its file form, expands
//     ${NAME} in it, leaves it empty for the commands that run without
//     secrets, and checks the modes of its file; the service keeps its
//     value out of the log.
//   - Duration and Date are how the file writes times and days; Limits is
//     courier.limits, which providers are given.
//
// internal/config reads the file: it decodes the courier-wide keys, hands
// each courier.adapters.<name> section to the Config of the provider of
// that name in the provider table, and calls Normalize, Defaults and Check
// on it in that order. It never names a provider.
package confkit
