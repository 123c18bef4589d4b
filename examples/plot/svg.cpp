// plot/svg.cpp — heatmap and line plot as SVG text (see svg.h).
#include "plot/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "autograd/node.h"

namespace plot::svg {

using autograd::Tensor;

namespace {

const char* kFont = "font-family=\"Helvetica, Arial, sans-serif\"";

// Width of a label in pixels, roughly, for a 12px sans-serif font.
double text_width(const std::string& s, double size = 12) {
  size_t chars = 0;
  for (unsigned char c : s) chars += (c & 0xC0) != 0x80;
  return double(chars) * size * 0.6;
}

std::string number(double v, int digits = 4) { return fmt::format("{:.{}g}", v, digits); }

// Round tick steps: 1, 2 or 5 times a power of ten, about `count` ticks over [lo, hi].
std::vector<double> ticks(double lo, double hi, int count = 6) {
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / count, power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power * (raw / power < 1.5 ? 1 : raw / power < 3.5 ? 2 : raw / power < 7.5 ? 5 : 10);
  std::vector<double> out;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step)
    out.push_back(std::abs(t) < step * 1e-9 ? 0.0 : t);
  return out;
}

}  // namespace

std::string escape(std::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string viridis(double t) {
  static const std::array<std::array<double, 3>, 9> stops = {{{68, 1, 84},
                                                              {71, 44, 122},
                                                              {59, 81, 139},
                                                              {44, 113, 142},
                                                              {33, 144, 141},
                                                              {39, 173, 129},
                                                              {92, 200, 99},
                                                              {170, 220, 50},
                                                              {253, 231, 37}}};
  if (!std::isfinite(t)) return "#cccccc";
  t = std::clamp(t, 0.0, 1.0) * double(stops.size() - 1);
  size_t i = std::min(size_t(t), stops.size() - 2);
  double f = t - double(i);
  auto mix = [&](int k) { return int(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k]))); };
  return fmt::format("#{:02x}{:02x}{:02x}", mix(0), mix(1), mix(2));
}

std::string heatmap(const std::vector<std::vector<double>>& values, const std::vector<std::string>& rows,
                    const std::vector<std::string>& columns, const HeatmapOptions& o) {
  if (values.size() != rows.size())
    throw std::invalid_argument(fmt::format("svg::heatmap: {} rows of values but {} row labels", values.size(), rows.size()));
  for (const auto& r : values)
    if (r.size() != columns.size())
      throw std::invalid_argument(
          fmt::format("svg::heatmap: a row has {} values but there are {} column labels", r.size(), columns.size()));
  double lo = o.lo.value_or(INFINITY), hi = o.hi.value_or(-INFINITY);
  for (const auto& r : values)
    for (double v : r)
      if (std::isfinite(v)) {
        if (!o.lo) lo = std::min(lo, v);
        if (!o.hi) hi = std::max(hi, v);
      }
  if (!std::isfinite(lo) || !std::isfinite(hi)) lo = 0, hi = 1;
  if (hi <= lo) hi = lo + 1;

  const double cell = 56, gap = 10;
  double label_w = 0, col_label_w = 0;
  for (const auto& r : rows) label_w = std::max(label_w, text_width(r));
  for (const auto& c : columns) col_label_w = std::max(col_label_w, text_width(c));
  const double left = 34 + label_w + gap, top = (o.title.empty() ? 16 : 44) + 20 + 18;
  const double grid_w = cell * double(columns.size()), grid_h = cell * double(rows.size());
  const double bar_x = left + grid_w + 28, bar_w = 16, width = bar_x + bar_w + 60, height = top + grid_h + 24;

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" {2}>\n",
      width, height, kFont);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  s += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int i = 0; i <= 10; ++i) s += fmt::format("<stop offset=\"{:.1f}\" stop-color=\"{}\"/>", i / 10.0, viridis(i / 10.0));
  s += "</linearGradient></defs>\n";
  if (!o.title.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"26\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n", width / 2,
                     escape(o.title));
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#444\">{}</text>\n",
                   left + grid_w / 2, top - 26, escape(o.column_title));
  s += fmt::format("<text transform=\"translate(16 {:.1f}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" "
                   "fill=\"#444\">{}</text>\n",
                   top + grid_h / 2, escape(o.row_title));
  for (size_t c = 0; c < columns.size(); ++c)
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                     left + cell * (double(c) + 0.5), top - 8, escape(columns[c]));
  for (size_t r = 0; r < rows.size(); ++r) {
    const double y = top + cell * double(r);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>\n",
                     left - gap, y + cell / 2, escape(rows[r]));
    for (size_t c = 0; c < columns.size(); ++c) {
      const double v = values[r][c], t = (v - lo) / (hi - lo);
      const std::string fill = viridis(t), text = fmt::format("{:.{}f}", v, o.decimals);
      const bool dark = !std::isfinite(t) ? false : t < 0.6;
      s += fmt::format("<g><title>{} → {}: {}</title>", escape(rows[r]), escape(columns[c]), number(v, 6));
      s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"{}\" stroke=\"white\"/>",
                       left + cell * double(c), y, cell, cell, fill);
      s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"13\" text-anchor=\"middle\" dominant-baseline=\"middle\" "
                       "fill=\"{}\">{}</text></g>\n",
                       left + cell * (double(c) + 0.5), y + cell / 2, dark ? "white" : "black", text);
    }
  }
  // the colour scale: a bar from lo (bottom) to hi (top) with ticks
  s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.0f}\" height=\"{:.0f}\" fill=\"url(#scale)\" stroke=\"#888\"/>\n",
                   bar_x, top, bar_w, grid_h);
  for (double t : ticks(lo, hi, 4)) {
    const double y = top + grid_h * (1 - (t - lo) / (hi - lo));
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#444\"/>"
                     "<text x=\"{3:.1f}\" y=\"{2:.1f}\" font-size=\"11\" dominant-baseline=\"middle\">{4}</text>\n",
                     bar_x + bar_w, bar_x + bar_w + 4, y, bar_x + bar_w + 7, number(t, 3));
  }
  return s + "</svg>\n";
}

std::string heatmap(const Tensor& matrix, const std::vector<std::string>& rows, const std::vector<std::string>& columns,
                    const HeatmapOptions& options) {
  if (matrix.dim() != 2)
    throw std::invalid_argument(fmt::format("svg::heatmap: expected a 2-D tensor, got shape {}", matrix.shape_str()));
  std::vector<double> flat;
  {
    autograd::NoGradGuard no_grad;
    flat = matrix.detach().to_vector<double>();
  }
  std::vector<std::vector<double>> values(size_t(matrix.size(0)));
  for (size_t r = 0; r < values.size(); ++r)
    values[r].assign(flat.begin() + std::ptrdiff_t(r * size_t(matrix.size(1))),
                     flat.begin() + std::ptrdiff_t((r + 1) * size_t(matrix.size(1))));
  return heatmap(values, rows, columns, options);
}

std::string line_plot(const std::vector<Series>& series, const PlotOptions& o) {
  static const char* palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"};
  double x_lo = INFINITY, x_hi = -INFINITY, y_lo = INFINITY, y_hi = -INFINITY;
  for (const Series& sr : series) {
    if (sr.x.size() != sr.y.size())
      throw std::invalid_argument(fmt::format("svg::line_plot: series '{}' has {} x values and {} y values", sr.name,
                                              sr.x.size(), sr.y.size()));
    for (size_t i = 0; i < sr.x.size(); ++i) {
      if (!std::isfinite(sr.x[i]) || !std::isfinite(sr.y[i])) continue;
      x_lo = std::min(x_lo, sr.x[i]), x_hi = std::max(x_hi, sr.x[i]);
      y_lo = std::min(y_lo, sr.y[i]), y_hi = std::max(y_hi, sr.y[i]);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  if (o.y_from_zero && y_lo > 0) y_lo = 0;
  if (x_hi <= x_lo) x_hi = x_lo + 1;
  if (y_hi <= y_lo) y_hi = y_lo + 1;
  y_hi += (y_hi - y_lo) * 0.05;  // a little headroom

  const double width = 680, height = 420, left = 64, right = 20, top = o.title.empty() ? 20 : 48, bottom = 52;
  const double pw = width - left - right, ph = height - top - bottom;
  auto px = [&](double x) { return left + pw * (x - x_lo) / (x_hi - x_lo); };
  auto py = [&](double y) { return top + ph * (1 - (y - y_lo) / (y_hi - y_lo)); };

  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0:.0f}\" height=\"{1:.0f}\" viewBox=\"0 0 {0:.0f} {1:.0f}\" {2}>\n",
      width, height, kFont);
  s += "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  if (!o.title.empty())
    s += fmt::format("<text x=\"{:.1f}\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">{}</text>\n", width / 2,
                     escape(o.title));
  for (double t : ticks(y_lo, y_hi)) {
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e6e6e6\"/>"
                     "<text x=\"{3:.1f}\" y=\"{2:.1f}\" font-size=\"11\" text-anchor=\"end\" dominant-baseline=\"middle\">{4}</text>\n",
                     left, left + pw, py(t), left - 6, number(t));
  }
  for (double t : ticks(x_lo, x_hi)) {
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1:.1f}\" y2=\"{2:.1f}\" stroke=\"#e6e6e6\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3:.1f}\" font-size=\"11\" text-anchor=\"middle\">{4}</text>\n",
                     px(t), top, top + ph, top + ph + 16, number(t, 6));
  }
  s += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"none\" stroke=\"#444\"/>\n",
                   left, top, pw, ph);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n", left + pw / 2,
                   height - 12, escape(o.x_label));
  s += fmt::format("<text transform=\"translate(16 {:.1f}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">{}</text>\n",
                   top + ph / 2, escape(o.y_label));

  for (size_t k = 0; k < series.size(); ++k) {
    const Series& sr = series[k];
    const std::string color = sr.color.empty() ? palette[k % 5] : sr.color;
    std::string desc;
    for (size_t i = 0; i < sr.x.size(); ++i) desc += (i ? "; " : "") + number(sr.x[i], 6) + " " + number(sr.y[i]);
    s += fmt::format("<g><title>{}</title><desc>{}</desc>\n", escape(sr.name), escape(desc));
    std::string points;
    auto flush = [&] {
      if (!points.empty())
        s += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\" points=\"{}\"/>\n", color, points);
      points.clear();
    };
    for (size_t i = 0; i < sr.x.size(); ++i) {
      if (!std::isfinite(sr.x[i]) || !std::isfinite(sr.y[i])) {
        flush();
        continue;
      }
      points += fmt::format("{}{:.1f},{:.1f}", points.empty() ? "" : " ", px(sr.x[i]), py(sr.y[i]));
      if (sr.markers)
        s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"><title>{} at {}: {}</title></circle>\n",
                         px(sr.x[i]), py(sr.y[i]), color, escape(sr.name), number(sr.x[i], 6), number(sr.y[i]));
    }
    flush();
    // legend entry, top right
    const double ly = top + 16 + 18 * double(k), lx = left + pw - 150;
    s += fmt::format("<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" stroke-width=\"2.5\"/>"
                     "<text x=\"{4:.1f}\" y=\"{2:.1f}\" font-size=\"12\" dominant-baseline=\"middle\">{5}</text>\n</g>\n",
                     lx, lx + 22, ly, color, lx + 28, escape(sr.name));
  }
  return s + "</svg>\n";
}

}  // namespace plot::svg
