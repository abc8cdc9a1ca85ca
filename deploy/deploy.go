// Package deploy holds what installs Courier as a system service: a
// hardened systemd unit (courier.service: Type=notify with a watchdog, a
// dedicated user, a read-only system) and the example configuration
// (courier.example.yaml) that `courier init` writes. Both are embedded, so
// the binary can print or install them; deploy/README.md says how to install.
package deploy

import _ "embed"

// Unit is the systemd unit, courier.service. It runs
// "/usr/local/bin/courier serve --root /var/lib/courier/workspace
// --log-format json" as the user courier.
//
//go:embed courier.service
var Unit []byte

// ExampleConfig is courier.example.yaml: every key of courier.yaml with
// its default or an example, the optional ones commented out. It is a
// valid config as it stands (the email receiver on 127.0.0.1:2525, no
// accounts).
//
//go:embed courier.example.yaml
var ExampleConfig []byte
