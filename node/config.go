package node

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	ma "github.com/multiformats/go-multiaddr"

	"github.com/tern-dev/tern/internal/atomicfile"
)

// ConfigFile holds a node's settings inside $TERN_HOME; flags of `tern
// node` override it. Every field is optional:
//
//	{
//	  "listen": ["/ip4/0.0.0.0/tcp/4001", "/ip4/0.0.0.0/udp/4001/quic-v1"],
//	  "api": "127.0.0.1:7420",
//	  "mdns": false,
//	  "nat": true,
//	  "relay_service": true,
//	  "sync_interval": "30s",
//	  "metrics_public": true
//	}
const ConfigFile = "config.json"

// configJSON is ConfigFile's shape; pointers tell a field left out from
// one set to its zero value.
type configJSON struct {
	Listen        []string `json:"listen"`
	API           *string  `json:"api"`
	MDNS          *bool    `json:"mdns"`
	NAT           *bool    `json:"nat"`
	RelayService  *bool    `json:"relay_service"`
	SyncInterval  *string  `json:"sync_interval"`
	MetricsPublic *bool    `json:"metrics_public"`
	Strict        *bool    `json:"strict"`
}

// configKeys are config.json's keys, for an error that names them.
var configKeys = []string{"listen", "api", "mdns", "nat", "relay_service", "sync_interval", "metrics_public", "strict"}

// LoadConfig reads home's config file; a missing file is the zero Config
// (every default). An unknown field, a bad multiaddr or duration is an
// error that names the file and the field.
func LoadConfig(home string) (Config, error) {
	path := filepath.Join(home, ConfigFile)
	var cfg Config
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return cfg, nil
	}
	if err != nil {
		return cfg, err
	}
	var f configJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	const todo = "fix it (tern node --help lists its keys), or remove it to run with the defaults"
	if err := dec.Decode(&f); err != nil {
		if key, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
			err = fmt.Errorf("unknown key %s; the keys are %s", key, strings.Join(configKeys, ", "))
		}
		return cfg, damagedHomeFile(path, err, todo)
	}
	for i, a := range f.Listen {
		if _, err := ma.NewMultiaddr(a); err != nil {
			return cfg, damagedHomeFile(path, fmt.Errorf("listen[%d] %q is not a multiaddr: %v", i, a, err), todo)
		}
	}
	cfg.Listen = f.Listen
	if f.API != nil {
		cfg.API = *f.API
	}
	if f.MDNS != nil {
		cfg.NoMDNS = !*f.MDNS
	}
	if f.NAT != nil {
		cfg.NAT = *f.NAT
	}
	if f.RelayService != nil {
		cfg.RelayService = *f.RelayService
	}
	if f.MetricsPublic != nil {
		cfg.MetricsPublic = *f.MetricsPublic
	}
	if f.Strict != nil {
		cfg.Strict = *f.Strict
	}
	if f.SyncInterval != nil {
		d, err := time.ParseDuration(*f.SyncInterval)
		if err != nil || d <= 0 {
			return cfg, damagedHomeFile(path, fmt.Errorf("sync_interval %q is not a positive duration such as \"30s\"", *f.SyncInterval), todo)
		}
		cfg.SyncInterval = d
	}
	return cfg, nil
}

// KeepListen writes listen into home's config file as its "listen", unless
// the file names one already, keeping every other key as it is: a node
// that chose a free port at its first start listens there again at the
// next, so that its paired peers' addresses for it stay right. It reports
// whether it wrote.
func KeepListen(home string, listen []string) (bool, error) {
	path := filepath.Join(home, ConfigFile)
	keys := map[string]json.RawMessage{}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return false, err
	default:
		if err := json.Unmarshal(data, &keys); err != nil {
			return false, damagedHomeFile(path, err, "fix it (tern node --help lists its keys), or remove it to run with the defaults")
		}
	}
	if _, ok := keys["listen"]; ok {
		return false, nil
	}
	keys["listen"], _ = json.Marshal(listen)
	out, err := json.MarshalIndent(keys, "", "  ")
	if err != nil {
		return false, err
	}
	return true, atomicfile.WriteFile(path, append(out, '\n'), 0o600)
}
