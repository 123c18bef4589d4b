// plot/svg.h — standalone SVG pictures, written as plain text (no dependency): an annotated heatmap (attention
// weights with the tokens on both axes, a colour scale, the value in each cell) and a line plot (loss
// curves). Open the files in any browser.
//
//   autograd::write_text_file("attention.svg", plot::svg::heatmap(weights, words, words, {.title = "..."}));
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "autograd/tensor.h"

namespace plot::svg {

using autograd::Tensor;

struct HeatmapOptions {
  std::string title;
  std::string row_title = "rows";        // printed along the left edge, e.g. "query word"
  std::string column_title = "columns";  // printed above the columns, e.g. "attended word"
  int decimals = 2;                      // digits after the point in each cell
  std::optional<double> lo, hi;          // colour scale range; default: the smallest and largest value
};
// values[r][c]; rows.size() labels the rows, columns.size() the columns (both must match the values).
std::string heatmap(const std::vector<std::vector<double>>& values, const std::vector<std::string>& rows,
                    const std::vector<std::string>& columns, const HeatmapOptions& options = {});
// A 2-D tensor.
std::string heatmap(const Tensor& matrix, const std::vector<std::string>& rows,
                    const std::vector<std::string>& columns, const HeatmapOptions& options = {});

struct Series {
  std::string name;           // legend text
  std::vector<double> x, y;   // same length; non-finite y values leave a gap
  std::string color;          // CSS colour; default: one of a fixed palette
  bool markers = false;       // a dot at every point (for sparse series)
};
struct PlotOptions {
  std::string title;
  std::string x_label = "step", y_label = "loss";
  bool y_from_zero = true;  // start the y axis at 0 when every value is positive
};
// Lines on shared axes with ticks and a legend. Each series also lists its points as text ("x y" pairs in
// its <desc>), so the numbers can be read back from the file.
std::string line_plot(const std::vector<Series>& series, const PlotOptions& options = {});

// Text made safe for XML content and attribute values (& < > " ').
std::string escape(std::string_view text);
// Colour of t in [0, 1] on the viridis scale, "#rrggbb".
std::string viridis(double t);

}  // namespace plot::svg
