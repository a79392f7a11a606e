package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTheConfigFileSetsWhatItNamesAndRefusesWhatItDoesNotKnow(t *testing.T) {
	home := t.TempDir()
	if cfg, err := LoadConfig(home); err != nil || cfg.API != "" || cfg.NAT || cfg.Listen != nil {
		t.Fatalf("no file should mean every default: %+v %v", cfg, err)
	}
	write := func(s string) {
		if err := os.WriteFile(filepath.Join(home, ConfigFile), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"listen": ["/ip4/127.0.0.1/tcp/4001"], "api": "127.0.0.1:7420", "mdns": false, "nat": true, "relay_service": true, "sync_interval": "5s", "metrics_public": true}`)
	cfg, err := LoadConfig(home)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Listen) != 1 || cfg.API != "127.0.0.1:7420" || !cfg.NoMDNS || !cfg.NAT || !cfg.RelayService || cfg.SyncInterval != 5*time.Second || !cfg.MetricsPublic {
		t.Fatalf("read %+v", cfg)
	}
	for bad, want := range map[string]string{
		`{"listen": ["not an addr"]}`: "listen[0]",
		`{"sync_interval": "soon"}`:   "sync_interval",
		`{"sync_interval": "-1s"}`:    "sync_interval",
		`{"relay": true}`:             `unknown key "relay"; the keys are listen, api, mdns, nat, relay_service, sync_interval, metrics_public, strict`,
		`{"nat": "yes"}`:              "nat",
		`{"metrics_public": 1}`:       "metrics_public",
		`{`:                           "config.json",
	} {
		write(bad)
		if _, err := LoadConfig(home); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ConfigFile) {
			t.Errorf("%s: %v, want an error naming the file and %q", bad, err, want)
		}
	}
}
