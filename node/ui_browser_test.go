package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium is the path of a Chromium the test can drive, or the test is
// skipped saying why.
func chromium(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium on PATH: .ci/run installs Debian's chromium (apt-get install chromium); the web page's browser test needs it")
	return ""
}

// The web page in headless Chromium, as a person uses it: log in with the
// one-time code, start a turn, approve its action, lose the live stream
// from the server's side mid-turn and see every item exactly once, then
// migrate the agent and see the page follow it. A screenshot of each step
// is saved under the test's temp folder.
func TestTheWebPageInABrowser(t *testing.T) {
	if raceEnabled {
		// A real browser in real time: under the race detector's slowdown
		// its steps' bounds say nothing about the page. CI runs it in the
		// plain pass.
		t.Skip("the browser test runs without the race detector")
	}
	path := chromium(t)
	a, b := startNode(t, t.TempDir()), startNode(t, t.TempDir())
	connectAll(t, a, b)
	agent := heldBy(t, a, withTools(t, a))
	shots := t.TempDir()

	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The browser's first start on a machine (its profile, its font
	// cache) can take minutes on a loaded CI machine: it is waited for on
	// its own, before the bound on the test's steps.
	// (chromedp binds the browser to the context of its first use: a
	// watchdog, not a deadline on that context, bounds the start.)
	watchdog := time.AfterFunc(5*time.Minute, cancel)
	err := chromedp.Do(ctx)
	watchdog.Stop()
	if err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	ctx, cancel = context.WithTimeout(ctx, 4*time.Minute) // a bound on a hang, not a speed
	defer cancel()
	shotIn := func(ctx context.Context, name string) error {
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			return fmt.Errorf("screenshot %s: %w", name, err)
		}
		return os.WriteFile(filepath.Join(shots, name+".png"), png, 0o644)
	}
	shot := func(name string) {
		t.Helper()
		if err := shotIn(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			// The step's error first: the bound on the test may have
			// passed, and the screenshot of the failure gets its own.
			sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
			serr := shotIn(sctx, "failed")
			scancel()
			t.Fatalf("%s: %v (screenshots in %s; of the failure: %v)", what, err, shots, serr)
		}
	}
	// until waits for the page's JavaScript expression cond to hold.
	until := func(what, cond string) {
		t.Helper()
		run(what, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(90*time.Second)))
	}

	code := loginCode(t, a)
	run("the login", chromedp.Navigate(code.URL), chromedp.WaitVisible(chromedp.ID("#main")))
	shot("1-logged-in")

	run("choosing the agent and a new session",
		chromedp.Click(chromedp.CSS(`#capsules li[data-agent="`+agent+`"] button`)),
		chromedp.WaitVisible(chromedp.ID("#agent-panel")))
	until("the agent's name as its heading", `document.getElementById("agent-title").textContent.startsWith("mover (…")`)
	// A person clicks what the page shows once it has shown it: its
	// holder and sync lines filled (they used to push the button down
	// under a click, onto Migrate).
	until("the agent's holder and sync lines", `document.getElementById("holder").textContent !== "" && document.getElementById("sync").textContent !== ""`)
	run("a new session",
		chromedp.Click(chromedp.ID("#new-session")),
		chromedp.WaitVisible(chromedp.ID("#session-panel")))
	run("starting a turn",
		chromedp.SendKeys(chromedp.ID("#turn-text"), `!call shell {"command": "until [ -e release ]; do sleep 0.05; done; echo slept"}`),
		chromedp.Click(chromedp.CSS("#turn-form button")),
		chromedp.WaitVisible(chromedp.CSS(".action[data-action]")))
	shot("2-paused-for-approval")
	until("the session waiting for the person is marked, by its first words", `[...document.querySelectorAll("#sessions li")].some(li => li.textContent.includes("waits for you") && li.textContent.includes("“!call shell"))`)

	run("approving", chromedp.Click(chromedp.CSS(".action .approve")))
	until("the continuing turn running", `[...document.querySelectorAll("#turns li")].some(li => li.dataset.status === "running")`)
	// An EventSource is open once the server has flushed the stream's
	// headers, which it does after it counts the stream as one to cut. The
	// shell call waits for the file release: the turn is still running.
	until("the page following the running turn on an open stream", `(() => {
		const li = [...document.querySelectorAll("#turns li")].find(li => li.dataset.status === "running");
		return !!li && state.sources.some(s => s.readyState === EventSource.OPEN && s.url.includes(li.dataset.turn));
	})()`)
	if cut := a.apiSrv.CutStreams(); cut == 0 {
		t.Fatal("no turn stream was open to cut")
	}
	// The shell call may end now: the page must take the rest of the turn
	// from a stream it opened again.
	if err := os.WriteFile(filepath.Join(a.home, WorkspacesDir, agent, "release"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	shot("3-stream-cut")
	until("the turn's end after the stream resumed", `[...document.querySelectorAll("#transcript .item.assistant")].some(e => e.textContent.includes("Done: shell returned slept"))`)
	until("the page's list of turns", `[...document.querySelectorAll("#turns li")].every(li => li.dataset.status !== "running")`)
	until("the paused turn says what continued it", `[...document.querySelectorAll("#turns li")].some(li => li.dataset.status === "paused" && li.textContent.includes("answered, continued by turn_"))`)
	shot("4-resumed")

	shown, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#transcript [data-event]")].map(e => e.dataset.event)`))
	if err != nil {
		t.Fatal(err)
	}
	sessionID, err := chromedp.Run(ctx, chromedp.Evaluate[string](`state.session`))
	if err != nil {
		t.Fatal(err)
	}
	evs, err := a.store.Events(agent, "")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range evs {
		if e.Session == sessionID && slices.Contains([]string{"message", "tool_call", "tool_result", "turn.ended"}, e.Type) {
			want = append(want, e.ID)
		}
	}
	if len(want) != 6 { // the message, its call, paused; the result, the answer, completed
		t.Fatalf("the session has only %d items to show", len(want))
	}
	slices.Sort(shown)
	slices.Sort(want)
	if !slices.Equal(shown, want) {
		t.Fatalf("the page shows %d items, the session has %d: each must be shown exactly once\nshown %v\nwant  %v", len(shown), len(want), shown, want)
	}

	run("migrating to the other node",
		chromedp.SetValue(chromedp.ID("#migrate-to"), b.info.PeerID),
		chromedp.Click(chromedp.CSS("#migrate-form button")),
		chromedp.WaitVisible(chromedp.CSS(`[data-outcome="committed"]`)))
	bannerText, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("#banner")))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(bannerText, b.info.PeerID[len(b.info.PeerID)-6:]) || !strings.Contains(bannerText, "moved to") && !strings.Contains(bannerText, "runs on") {
		t.Fatalf("the banner after the move: %q", bannerText)
	}
	until("the holder shown as the other node", `document.getElementById("holder").textContent.includes("`+b.info.PeerID[len(b.info.PeerID)-6:]+`")`)
	until("a copy offers no move, new session or message", `["migrate-form", "new-session", "turn-form"].every(id => document.getElementById(id).hidden)`)
	until("the session's turns counted right", `[...document.querySelectorAll("#sessions li")].some(li => li.textContent.includes("2 turns · completed"))`)
	shot("5-migrated")
	if !b.runs(agent) {
		t.Fatal("the other node does not run the agent")
	}
	pageHTML, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html")))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(pageHTML, a.info.Token) {
		t.Fatal("the bearer token is in the page")
	}

	// A node that holds no agent yet says how to give it one.
	empty := startNode(t, t.TempDir())
	run("an empty node's page", chromedp.Navigate(loginCode(t, empty).URL), chromedp.WaitVisible(chromedp.ID("#main")))
	until("the first screen's hint", `document.getElementById("capsules").textContent.includes("tern capsule import")`)
	shot("6-empty-node")
	t.Logf("screenshots in %s", shots)
	if dir := os.Getenv("TERN_UI_SHOTS"); dir != "" { // to look at them after the test
		os.MkdirAll(dir, 0o755)
		entries, _ := os.ReadDir(shots)
		for _, e := range entries {
			data, _ := os.ReadFile(filepath.Join(shots, e.Name()))
			os.WriteFile(filepath.Join(dir, e.Name()), data, 0o644)
		}
	}
}
