package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

var (
	white     = color.RGBA{255, 255, 255, 255}
	black     = color.RGBA{0, 0, 0, 255}
	grey      = color.RGBA{225, 225, 225, 255}
	red       = color.RGBA{200, 30, 30, 255}
	stageInks = map[string]color.RGBA{
		StageConsume: {31, 119, 180, 255},
		StageDecode:  {255, 127, 14, 255},
		StageE2E:     {44, 160, 44, 255},
	}
)

// series is one line of a panel.
type series struct {
	ink    color.RGBA
	dashed bool
	x, y   []float64
}

// panel is one chart: a title, a y unit and its lines.
type panel struct {
	title string
	lines []series
	hline float64 // a dashed red reference line when > 0
}

// WritePNG draws three panels for the throughput stages, on a shared time
// axis (seconds since partitions were assigned): events/s, events done
// (e2e: consumed solid, committed dashed) and RSS.
func WritePNG(path string, r *Report) error {
	var rate, done, rss panel
	rate.title = "events/s (thousands), 0.3 s window"
	done.title = "events done (millions); e2e dashed = committed"
	rss.title = "RSS (MiB); red = 64 MiB target"
	rss.hline = 64
	xmax := 0.0
	for _, s := range r.Stages {
		ink := stageInks[s.Name]
		var rx, ry, dx, dy, cx, cy, mx, my []float64
		for i, p := range s.Series {
			if p.T < 0 {
				continue
			}
			xmax = max(xmax, p.T)
			if j := i - 3; j >= 0 && p.T > s.Series[j].T {
				rx = append(rx, p.T)
				ry = append(ry, float64(p.Done-s.Series[j].Done)/(p.T-s.Series[j].T)/1e3)
			}
			dx, dy = append(dx, p.T), append(dy, float64(p.Done)/1e6)
			if s.Name == StageE2E {
				cx, cy = append(cx, p.T), append(cy, float64(p.Committed)/1e6)
			}
			mx, my = append(mx, p.T), append(my, float64(p.RSS)/(1<<20))
		}
		rate.lines = append(rate.lines, series{ink: ink, x: rx, y: ry})
		done.lines = append(done.lines, series{ink: ink, x: dx, y: dy})
		if len(cx) > 0 {
			done.lines = append(done.lines, series{ink: ink, dashed: true, x: cx, y: cy})
		}
		rss.lines = append(rss.lines, series{ink: ink, x: mx, y: my})
	}
	if xmax == 0 {
		xmax = 1
	}
	const W, ph, top = 1000, 260, 60
	img := image.NewRGBA(image.Rect(0, 0, W, top+3*ph+40))
	fillRect(img, 0, 0, W, img.Bounds().Dy(), white)
	title := fmt.Sprintf("deltaflow bench: %d events, %d partitions, GOMAXPROCS=%d", r.Events, r.Partitions, r.GoMaxProcs)
	drawText(img, 20, 12, title, black, 2)
	// Legend.
	x := 20
	for _, s := range r.Stages {
		ink := stageInks[s.Name]
		fillRect(img, x, 40, 24, 4, ink)
		label := fmt.Sprintf("%s %.0fk/s, peak %.0f MiB", s.Name, s.EPS/1e3, float64(s.PeakRSSBytes)/(1<<20))
		drawText(img, x+30, 36, label, black, 1)
		x += 30 + textWidth(label, 1) + 30
	}
	for i, p := range []panel{rate, done, rss} {
		drawPanel(img, image.Rect(70, top+i*ph+20, W-20, top+(i+1)*ph-20), p, xmax)
	}
	drawText(img, W/2-100, img.Bounds().Dy()-22, "seconds since partitions assigned", black, 1)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func drawPanel(img *image.RGBA, area image.Rectangle, p panel, xmax float64) {
	ymax := p.hline * 1.1
	for _, l := range p.lines {
		for _, v := range l.y {
			ymax = max(ymax, v)
		}
	}
	ystep := niceStep(ymax / 5)
	ymax = math.Ceil(ymax/ystep) * ystep
	if ymax == 0 {
		ymax, ystep = 1, 0.2
	}
	xstep := niceStep(xmax / 10)
	px := func(x float64) int { return area.Min.X + int(x/xmax*float64(area.Dx())) }
	py := func(y float64) int { return area.Max.Y - int(y/ymax*float64(area.Dy())) }
	// Grid and ticks.
	for y := 0.0; y <= ymax+ystep/2; y += ystep {
		hline(img, area.Min.X, area.Max.X, py(y), grey, false)
		label := trimFloat(y)
		drawText(img, area.Min.X-8-textWidth(label, 1), py(y)-3, label, black, 1)
	}
	for x := 0.0; x <= xmax+xstep/100; x += xstep {
		vline(img, px(x), area.Min.Y, area.Max.Y, grey)
		label := trimFloat(x)
		drawText(img, px(x)-textWidth(label, 1)/2, area.Max.Y+6, label, black, 1)
	}
	hline(img, area.Min.X, area.Max.X, area.Max.Y, black, false)
	vline(img, area.Min.X, area.Min.Y, area.Max.Y, black)
	drawText(img, area.Min.X, area.Min.Y-14, p.title, black, 1)
	if p.hline > 0 {
		hline(img, area.Min.X, area.Max.X, py(p.hline), red, true)
	}
	for _, l := range p.lines {
		for i := 1; i < len(l.x); i++ {
			if l.dashed && i%2 == 0 {
				continue
			}
			line(img, px(l.x[i-1]), py(l.y[i-1]), px(l.x[i]), py(l.y[i]), l.ink)
		}
	}
}

// niceStep rounds a raw step to 1, 2 or 5 times a power of ten.
func niceStep(raw float64) float64 {
	if raw <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	for s[len(s)-1] == '0' {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

func hline(img *image.RGBA, x0, x1, y int, c color.Color, dashed bool) {
	for x := x0; x <= x1; x++ {
		if !dashed || (x/6)%2 == 0 {
			img.Set(x, y, c)
		}
	}
}

func vline(img *image.RGBA, x, y0, y1 int, c color.Color) {
	for y := y0; y <= y1; y++ {
		img.Set(x, y, c)
	}
}

// line draws a 2-pixel-thick line (Bresenham).
func line(img *image.RGBA, x0, y0, x1, y1 int, c color.Color) {
	dx, dy := abs(x1-x0), -abs(y1-y0)
	sx, sy := 1, 1
	if x0 > x1 {
		sx = -1
	}
	if y0 > y1 {
		sy = -1
	}
	err := dx + dy
	for {
		img.Set(x0, y0, c)
		img.Set(x0, y0+1, c)
		img.Set(x0+1, y0, c)
		if x0 == x1 && y0 == y1 {
			return
		}
		e2 := 2 * err
		if e2 >= dy {
			err += dy
			x0 += sx
		}
		if e2 <= dx {
			err += dx
			y0 += sy
		}
	}
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}
