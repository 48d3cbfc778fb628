"""``LinePane``: a pane drawn line by line from styled text (Textual's Line API), the base of
every pane and of the GPU rows and key bar; ``LEVELS``, the styles a line may ask for."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.strip import Strip
from textual.widget import Widget

LEVELS = ("label", "name", "value", "good", "warn", "bad", "dim", "spark", "select", "key")


class LinePane(Widget):
    """A pane drawn line by line from styled text (Textual's Line API): exact columns, and a
    repaint only when the text or its styles changed, which keeps bytes over ssh down."""

    COMPONENT_CLASSES = {f"pane--{level}" for level in LEVELS}

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._rendered: tuple | None = None
        self._cache: dict[object, list[Text]] = {}
        self._strips: dict[int, Strip] = {}
        self._strips_key: tuple[int, int] | None = None
        self._styles: dict[str, Style] = {}
        self._style = Style()

    def build_lines(self, width: int) -> list[Text]:
        raise NotImplementedError

    def cache_key(self, width: int) -> object:
        """What the lines depend on besides the content: the width (a pane whose lines depend
        on more, the terminal's height, says so)."""
        return width

    def lines_for(self, width: int) -> list[Text]:
        """The lines at ``width``, built once per content and width: the layout's height
        query and the drawing read the same lines (building them twice was a tenth of the
        screen's cost)."""
        key = self.cache_key(width)
        lines = self._cache.get(key)
        if lines is None:
            if len(self._cache) > 4:  # a resize went through widths: keep only the latest
                self._cache.clear()
            lines = self._cache[key] = self.build_lines(width)
        return lines

    def style_for(self, level: str) -> Style:
        """A level's style, looked up once per theme (Textual resolves it from the stylesheet
        each time: a tenth of the screen's cost when every line of a GPU's history asked)."""
        style = self._styles.get(level)
        if style is None:
            style = self._styles[level] = self.get_component_rich_style(
                f"pane--{level}", partial=True
            )
        return style

    def lines(self) -> list[Text]:
        return self.lines_for(self.size.width or self.app.size.width)

    def changed(self) -> None:
        """The data changed: rebuild, and repaint if what is shown differs."""
        self._cache = {}
        self._strips = {}
        key = tuple((line.plain, tuple(line.spans)) for line in self.lines())
        if key != self._rendered:
            grew = self._rendered is None or len(key) != len(self._rendered)
            self._rendered = key
            self.refresh(layout=grew)

    def notify_style_update(self) -> None:
        """The theme changed: styles must be looked up again."""
        self._cache = {}
        self._strips = {}
        self._styles = {}
        super().notify_style_update()

    def get_content_height(self, container, viewport, width: int) -> int:
        return len(self.lines_for(width))

    def text(self) -> str:
        return "\n".join(line.plain for line in self.lines())

    def render_line(self, y: int) -> Strip:
        """Line ``y`` as a strip, made once per content, width and style (a GPU row's history
        repaints every reading: its strips were half the screen's cost)."""
        lines = self.lines()
        width = self.size.width
        key = (width, len(lines))
        if self._strips_key != key or not self._strips:
            # the pane's own style (its background through its ancestors) once per drawing
            self._strips_key, self._strips, self._style = key, {}, self.rich_style
        strip = self._strips.get(y)
        if strip is None:
            if y >= len(lines):
                strip = Strip.blank(width, self._style)
            else:
                segments = list(lines[y].render(self.app.console))
                strip = Strip(segments).crop(0, width).extend_cell_length(width)
                strip = strip.apply_style(self._style)
            self._strips[y] = strip
        return strip
