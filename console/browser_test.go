package console_test

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser starts Debian's chromium, headless, for the test; a machine
// without it fails the test (scripts/services.sh installs it).
func browser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal("chromium is required (apt-get install chromium; scripts/services.sh does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.WindowSize(1280, 800), chromedp.Flag("proxy-server", "direct://"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// clickToPage clicks what sel finds and waits for the page it leads to:
// a wait for the next page's elements run at once could query the page
// being left, and its nodes gone with it fail the action.
func clickToPage(sel string, opts ...chromedp.QueryOption) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := chromedp.RunResponse(ctx, chromedp.Click(sel, opts...))
		return err
	})
}

// demoData adds the demo's endpoints (billing, audit) and an hour of their
// attempts, so that the overview has something to show.
func demoData(t *testing.T, b bundle) {
	t.Helper()
	b.exec(t, `INSERT INTO webhook_endpoints (name, url, secret, event_types) VALUES
		('billing', 'http://127.0.0.1:8089/hooks', 'whsec_demo', '{invoice.paid}'), ('audit', 'http://127.0.0.1:8090/hooks', 'whsec_demo', '{}')`)
	b.exec(t, `INSERT INTO webhook_attempts (delivery_id, endpoint_id, attempt, started_at, duration_ms, status, error_class, error)
		SELECT gen_random_uuid(), e.id, 1, now() - g * interval '20 seconds', 20 + (g % 7) * 9 + CASE WHEN g % 50 = 0 THEN 400 ELSE 0 END,
		       CASE WHEN e.name = 'audit' AND g % 10 = 0 THEN 503 ELSE 200 END,
		       CASE WHEN e.name = 'audit' AND g % 10 = 0 THEN 'retryable' END, CASE WHEN e.name = 'audit' AND g % 10 = 0 THEN 'http 503' END
		FROM webhook_endpoints e, generate_series(1, 170) g WHERE e.name IN ('billing', 'audit')`)
	b.exec(t, `INSERT INTO webhook_outbox (event_type, payload, endpoint_id) SELECT 'invoice.paid', '{"invoice": 9}', id FROM webhook_endpoints WHERE name = 'audit'`)
	b.exec(t, `UPDATE webhook_endpoints SET last_error = 'http 503', last_status = 503, last_error_at = now() - interval '3 minutes' WHERE name = 'audit'`)
}

// A real browser logs in, sees the overview refresh itself, opens shop's
// page, replays its dead letters (they move back to the outbox) and
// disables it. CONSOLE_SCREENSHOT=path keeps a screenshot of the overview
// with its charts (docs/console-overview.png).
func TestBrowser(t *testing.T) {
	t.Parallel()
	b := setup(t)
	demoData(t, b)
	chartData(t, b)
	ctx := browser(t)
	var overview []byte
	err := chromedp.Run(ctx,
		chromedp.Navigate(b.url+"/"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", testToken, chromedp.ByID),
		clickToPage("#login", chromedp.ByID),
		chromedp.WaitVisible(`tr[data-endpoint="shop"]`, chromedp.ByQuery),
		chromedp.WaitReady("body[data-refreshed]", chromedp.ByQuery), // the overview refreshed itself (every 5 s)
		chromedp.WaitVisible(`tr[data-endpoint="audit"]`, chromedp.ByQuery),
		chromedp.FullScreenshot(&overview, 100),
	)
	if err != nil {
		t.Fatalf("login and overview: %v", err)
	}
	if p := os.Getenv("CONSOLE_SCREENSHOT"); p != "" {
		if err := os.WriteFile(p, overview, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The overview's figures are replaced every 5 s: a click on a link
	// among them could land on the copy being replaced and go nowhere. The
	// browser follows the link's own address instead.
	var link string
	var linked bool
	err = chromedp.Run(ctx, chromedp.AttributeValue(`tr[data-endpoint="shop"] a`, "href", &link, &linked, chromedp.ByQuery))
	if err != nil || !linked {
		t.Fatalf("shop's link on the overview: %q, %v", link, err)
	}
	page, err := url.Parse(b.url + "/")
	if err != nil {
		t.Fatal(err)
	}
	shop, err := page.Parse(link)
	if err != nil || shop.Path != "/endpoints/shop" {
		t.Fatalf("shop's link on the overview: %q (%v), want its page", link, err)
	}
	var flash string
	err = chromedp.Run(ctx,
		chromedp.Navigate(shop.String()),
		chromedp.WaitVisible("#replay-form", chromedp.ByID),
		clickToPage("#replay", chromedp.ByID),
		chromedp.WaitVisible(".flash", chromedp.ByQuery),
		chromedp.Text(".flash", &flash, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("endpoint page and replay: %v", err)
	}
	if !strings.Contains(flash, "Replayed 2") {
		t.Fatalf("after the replay: %q", flash)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_outbox WHERE NOT processed AND delivery_id IN ($1, $2)", deadShop1, deadShop2); n != 2 {
		t.Fatalf("%d of shop's dead letters back in the outbox, want 2", n)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_dead_letter WHERE endpoint_id = $1", b.ids["shop"]); n != 0 {
		t.Fatalf("%d of shop's dead letters left, want 0", n)
	}
	err = chromedp.Run(ctx,
		chromedp.Evaluate(`window.confirm = () => true`, nil), // the disable button asks first
		chromedp.SendKeys(`#disable-form input[name="reason"]`, "from the browser", chromedp.ByQuery),
		clickToPage("#disable", chromedp.ByID),
		chromedp.WaitVisible("#enable", chromedp.ByID),
		chromedp.Text(".flash", &flash, chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("disable: %v", err)
	}
	if n := b.count(t, "SELECT count(*) FROM webhook_endpoints WHERE name = 'shop' AND NOT enabled AND disabled_reason = 'from the browser'"); n != 1 {
		t.Fatalf("shop is not disabled (flash %q)", flash)
	}
	// Its two replayed deliveries went back to the dead letter with the disable.
	if !strings.Contains(flash, "2 pending deliveries dead-lettered") {
		t.Fatalf("after the disable: %q", flash)
	}
}
