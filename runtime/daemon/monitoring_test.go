package daemon

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.yaml.in/yaml/v3"

	"github.com/deltaflow/deltaflow/actors"
	"github.com/deltaflow/deltaflow/internal/tests/testenv"
)

// deployDir holds the Prometheus rules and the Grafana dashboard the
// compose stack's monitoring profile ships.
const deployDir = "../../deploy"

// foreignSeries are the series deploy/ queries that deltaflow does not
// export: Prometheus's own, and the node exporter's (the monitoring
// profile runs it).
var foreignSeries = []string{"up", "node_filesystem_avail_bytes", "node_filesystem_size_bytes"}

// seriesRef matches a series name in a PromQL expression: deltaflow's own,
// the process and Go collectors' it serves beside them, the foreign ones.
var seriesRef = regexp.MustCompile(`\b(?:(?:deltaflow|process|go|node)_[a-zA-Z0-9_]+|up)\b`)

// exportedSeries returns the series names a /metrics body exposes: each
// family's name, and a histogram's _bucket, _sum and _count.
func exportedSeries(body string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(body) {
		f := strings.Fields(line)
		if len(f) != 4 || f[0] != "#" || f[1] != "TYPE" {
			continue
		}
		out[f[2]] = true
		if f[3] == "histogram" || f[3] == "summary" {
			out[f[2]+"_sum"], out[f[2]+"_count"] = true, true
		}
		if f[3] == "histogram" {
			out[f[2]+"_bucket"] = true
		}
	}
	return out
}

// monitoringExprs returns every PromQL expression of the alert rules and
// the dashboard, keyed by where it is.
func monitoringExprs(t *testing.T) map[string]string {
	t.Helper()
	exprs := map[string]string{}
	data, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			exprs["alert "+r.Alert] = r.Expr
		}
	}
	data, err = os.ReadFile(filepath.Join(deployDir, "grafana", "dashboards", "deltaflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				RefID string `json:"refId"`
				Expr  string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("deltaflow.json: %v", err)
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs["panel "+p.Title+" "+tg.RefID] = tg.Expr
		}
	}
	if len(exprs) < 20 {
		t.Fatalf("only %d expressions in deploy/; the files were not read as expected", len(exprs))
	}
	return exprs
}

// checkMonitoring holds the shipped alert rules and dashboard to the
// metrics a running deltaflow serves (body is its /metrics): every series
// they query exists, and promtool accepts the rules and passes their unit
// tests.
func checkMonitoring(t *testing.T, body string) {
	t.Helper()
	exported := exportedSeries(body)
	for _, name := range foreignSeries {
		exported[name] = true
	}
	// A vector with no series yet (deltaflow_partition_held before any
	// hold) is exported all the same once it has one.
	for _, name := range deltaflowMetricNames(t) {
		exported[name] = true
	}
	for where, expr := range monitoringExprs(t) {
		refs := seriesRef.FindAllString(expr, -1)
		if len(refs) == 0 {
			t.Errorf("%s: %q queries no series deltaflow exports", where, expr)
		}
		for _, name := range refs {
			if !exported[name] {
				t.Errorf("%s: %s is not among the series deltaflow exports", where, name)
			}
		}
	}
	t.Run("promtool", func(t *testing.T) {
		promtool := testenv.Tool(t, "promtool")
		dir := filepath.Join(deployDir, "prometheus")
		for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"check", "config", "prometheus.yml"}, {"test", "rules", "alerts_test.yml"}} {
			cmd := exec.Command(promtool, args...)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	})
}

// Every metric deltaflow registers is queried by the dashboard, so a new
// one is not forgotten there.
func TestDashboardShowsEveryMetric(t *testing.T) {
	exprs := slices.Collect(func(yield func(string) bool) {
		for _, e := range monitoringExprs(t) {
			if !yield(e) {
				return
			}
		}
	})
	all := strings.Join(exprs, "\n")
	for _, name := range deltaflowMetricNames(t) {
		if !strings.Contains(all, name) {
			t.Errorf("%s is in /metrics but neither the dashboard nor an alert uses it", name)
		}
	}
}

// deltaflowMetricNames lists the deltaflow_* metrics Run registers, from
// their descriptors (a vector with no series yet is described all the
// same).
func deltaflowMetricNames(t *testing.T) []string {
	t.Helper()
	reg := prometheus.NewRegistry()
	actors.NewMetrics(reg)
	reg.MustRegister(buildInfo(Build{Version: "test"}), dlqCollector{})
	descs := make(chan *prometheus.Desc)
	go func() {
		reg.Describe(descs)
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	var names []string
	for d := range descs {
		m := fqName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no fqName in %s", d)
		}
		if strings.HasPrefix(m[1], "deltaflow_") {
			names = append(names, m[1])
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d deltaflow metrics described: %v", len(names), names)
	}
	return names
}

// TestBuildInfoMetric: deltaflow_build_info carries the fields `deltaflow
// version` prints.
func TestBuildInfoMetric(t *testing.T) {
	b := Build{Version: "1.2.3", Revision: "abc123-dirty", GoVersion: "go1.99"}
	reg := prometheus.NewRegistry()
	reg.MustRegister(buildInfo(b))
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 1 {
		t.Fatalf("gather: %v %v", mfs, err)
	}
	labels := map[string]string{}
	for _, l := range mfs[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if want := map[string]string{"version": "1.2.3", "revision": "abc123-dirty", "goversion": "go1.99"}; !maps.Equal(labels, want) {
		t.Errorf("labels %v, want %v", labels, want)
	}
}

// TestDashboardStructure holds the Grafana dashboard to what a user of
// several replicas and a provisioned data source needs (no Grafana can be
// installed here to load it): data source and instance variables, every
// panel and query on the data source variable, every deltaflow series
// filtered by instance, every stat panel with thresholds, the Version panel
// showing the version label rather than the metric's value 1; and every
// query is valid PromQL (promtool parses it as a recording rule).
func TestDashboardStructure(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deployDir, "grafana", "dashboards", "deltaflow.json"))
	if err != nil {
		t.Fatal(err)
	}
	type datasource struct{ Type, UID string }
	var dash struct {
		Templating struct {
			List []struct {
				Name, Type string
				Query      any
			}
		}
		Panels []struct {
			Title, Type string
			Datasource  *datasource
			Targets     []struct {
				Expr         string
				LegendFormat string
				Datasource   *datasource
			}
			FieldConfig struct {
				Defaults struct {
					Thresholds *struct{ Steps []struct{ Color string } }
				}
			}
			Options struct{ TextMode string }
		}
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	for _, v := range dash.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["instance"] != "query" {
		t.Errorf("template variables %v; want a datasource variable and an instance query", vars)
	}
	const ds = "${datasource}"
	var rules strings.Builder
	rules.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	series := regexp.MustCompile(`\b(?:deltaflow|process)_[a-zA-Z0-9_]+(\{[^}]*\})?`)
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != ds {
			t.Errorf("panel %q: data source %+v, want %s", p.Title, p.Datasource, ds)
		}
		if p.Type == "stat" && (p.FieldConfig.Defaults.Thresholds == nil || len(p.FieldConfig.Defaults.Thresholds.Steps) == 0) {
			t.Errorf("stat panel %q has no thresholds", p.Title)
		}
		for i, tg := range p.Targets {
			if tg.Datasource == nil || tg.Datasource.UID != ds {
				t.Errorf("panel %q query %d: data source %+v, want %s", p.Title, i, tg.Datasource, ds)
			}
			for _, m := range series.FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(m[1], `instance=~"$instance"`) {
					t.Errorf("panel %q: %s is not filtered by the instance variable", p.Title, m[0])
				}
			}
			expr := strings.ReplaceAll(tg.Expr, "$instance", ".*")
			fmt.Fprintf(&rules, "      - record: dashboard:%s:%d\n        expr: %q\n", strings.ToLower(regexp.MustCompile(`\W+`).ReplaceAllString(p.Title, "_")), i, expr)
		}
		if p.Title == "Version" && (p.Options.TextMode != "name" || len(p.Targets) != 1 || p.Targets[0].LegendFormat != "{{version}}") {
			t.Errorf("Version panel: text mode %q, legend %+v; want the version label shown (textMode name, legend {{version}})", p.Options.TextMode, p.Targets)
		}
	}
	file := filepath.Join(t.TempDir(), "dashboard_rules.yml")
	if err := os.WriteFile(file, []byte(rules.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(testenv.Tool(t, "promtool"), "check", "rules", file).CombinedOutput(); err != nil {
		t.Errorf("the dashboard's queries are not all valid PromQL: %v\n%s", err, out)
	}
}
