package statuspage

import (
	"fmt"
	"html/template"
	"strconv"
	"strings"
	"time"
)

// The status page's charts: inline SVG drawn here, so that the page needs
// no script and nothing from elsewhere.

// Chart geometry, in SVG user units (CSS pixels at the page's size).
const (
	chartW, chartH = 380, 100
	chartPadL      = 4   // left of the plot
	chartPadR      = 4   // right of the plot
	chartPadT      = 16  // above the plot: the title
	chartPadB      = 14  // below the plot: the time axis
	chartPoints    = 300 // at most this many points per series
)

// series is one line of a chart: a value per sample.
type series struct {
	name, colour string
	value        func(Sample) float64
	dash         string // stroke-dasharray, "" for a solid line
}

// chart draws the series over ss as an SVG with id id. Every polyline
// carries the value and time of its last point (data-last, data-last-at),
// which is the last sample's; the plot's top is data-max, and it spans
// data-plot-top to data-plot-bottom of the viewBox from 0 to data-max.
// With more than chartPoints samples it draws every k-th, ending on the
// last.
func chart(id, title, unit string, ss []Sample, lines ...series) template.HTML {
	var b strings.Builder
	top := 0.0
	for _, s := range ss {
		for _, l := range lines {
			top = max(top, l.value(s))
		}
	}
	top = niceMax(top)
	fmt.Fprintf(&b, `<svg id="%s" class="chart" xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" data-max="%s" data-plot-top="%d" data-plot-bottom="%d">`,
		id, chartW, chartH, chartW, chartH, num(top), chartPadT, chartH-chartPadB)
	fmt.Fprintf(&b, `<rect x="0.5" y="0.5" width="%d" height="%d" fill="#fff" stroke="#ddd"/>`, chartW-1, chartH-1)
	fmt.Fprintf(&b, `<text x="6" y="12" font-size="11" fill="#333">%s`, template.HTMLEscapeString(title))
	if len(ss) > 0 {
		last := ss[len(ss)-1]
		for _, l := range lines {
			fmt.Fprintf(&b, ` <tspan fill="%s">%s %s</tspan>`, l.colour, template.HTMLEscapeString(l.name), short(l.value(last)))
		}
	}
	fmt.Fprintf(&b, ` (%s; top %s)</text>`, template.HTMLEscapeString(unit), short(top))
	if len(ss) == 0 {
		fmt.Fprintf(&b, `<text x="6" y="60" font-size="11" fill="#777">no samples yet</text></svg>`)
		return template.HTML(b.String())
	}
	idx := pick(len(ss), chartPoints)
	t0, t1 := ss[idx[0]].At, ss[len(ss)-1].At
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`, chartPadL, chartH-chartPadB, chartW-chartPadR, chartH-chartPadB)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#777">%s ago</text>`, chartPadL+2, chartH-3, t1.Sub(t0).Round(time.Second))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#777" text-anchor="end">now</text>`, chartW-chartPadR-2, chartH-3)
	for _, l := range lines {
		last := ss[len(ss)-1]
		fmt.Fprintf(&b, `<polyline class="series" data-series="%s" data-last="%s" data-last-at="%s" fill="none" stroke="%s" stroke-width="1.5"`,
			template.HTMLEscapeString(l.name), num(l.value(last)), last.At.UTC().Format(time.RFC3339Nano), l.colour)
		if l.dash != "" {
			fmt.Fprintf(&b, ` stroke-dasharray="%s"`, l.dash)
		}
		b.WriteString(` points="`)
		for j, i := range idx {
			if j > 0 {
				b.WriteByte(' ')
			}
			x, y := chartXY(ss[i].At, l.value(ss[i]), t0, t1, top)
			b.WriteString(num1(x) + "," + num1(y))
		}
		b.WriteString(`"/>`)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// chartXY is where the value v at t goes in a plot from t0 to t1 and from
// 0 to top.
func chartXY(t time.Time, v float64, t0, t1 time.Time, top float64) (x, y float64) {
	w := float64(chartW - chartPadL - chartPadR)
	h := float64(chartH - chartPadT - chartPadB)
	x = chartPadL + w
	if span := t1.Sub(t0); span > 0 {
		x = chartPadL + w*float64(t.Sub(t0))/float64(span)
	}
	return x, chartPadT + h*(1-min(max(v, 0), top)/top)
}

// chartValue is the value at the height y of a plot from 0 to top: the
// inverse of chartXY's y, to one decimal of a unit of y.
func chartValue(y, top float64) float64 {
	h := float64(chartH - chartPadT - chartPadB)
	return (1 - (y-chartPadT)/h) * top
}

// pick returns at most n indices of 0..len-1, evenly spaced, the last
// one len-1.
func pick(length, n int) []int {
	step := (length + n - 1) / n
	var idx []int
	for i := (length - 1) % step; i < length; i += step {
		idx = append(idx, i)
	}
	return idx
}

// niceMax is the top of a plot showing values up to v: 1, 2 or 5 times a
// power of ten, at least v; 1 for nothing.
func niceMax(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1e-3
	for p*10 <= v {
		p *= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if p*m >= v {
			return p * m
		}
	}
	return p * 10
}

// num formats a value exactly (the shortest form that parses back to it),
// to compare with /status.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// short formats a value for people: four significant digits.
func short(v float64) string {
	if v >= 1000 || v <= -1000 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// num1 formats a coordinate to one decimal.
func num1(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }
