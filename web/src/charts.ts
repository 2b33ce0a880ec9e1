// ECharts, with only the chart types and components the dashboard draws (tree-shaken): the
// heatmap's cells are a custom series (heatmap.ts says why), the rest lines and bars.
import * as echarts from "echarts/core";
import { BarChart, CustomChart, LineChart } from "echarts/charts";
import {
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapComponent,
} from "echarts/components";
import { CanvasRenderer } from "echarts/renderers";

echarts.use([
  BarChart,
  CustomChart,
  LineChart,
  DataZoomComponent,
  GridComponent,
  LegendComponent,
  MarkAreaComponent,
  TitleComponent,
  TooltipComponent,
  VisualMapComponent,
  CanvasRenderer,
]);

export type Chart = echarts.ECharts;
// Colour helpers (parse, interpolate) of the library, so the heatmap's cells match its scale.
export const color = echarts.color;
export type Option = echarts.EChartsCoreOption;

// A chart in `host`, made once and kept while the view lives (refreshes only set its option, so
// zoom and pan survive a refresh).
export function chartIn(host: HTMLElement): Chart {
  const existing = echarts.getInstanceByDom(host);
  if (existing) return existing;
  const c = echarts.init(host, undefined, { renderer: "canvas" });
  new ResizeObserver(() => c.resize()).observe(host);
  return c;
}

export function dispose(host: HTMLElement): void {
  echarts.getInstanceByDom(host)?.dispose();
}
