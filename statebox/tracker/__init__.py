"""The detector/tracker baseline: ultralytics YOLO + ByteTrack, run inside the tracker sandbox.

Host side (this package): exporting the generated suite's ground truth as a YOLO data set
(`export`), running training and tracking in the tracker container (`container`), and the
shipped weights (`statebox/models/`). Container side (`runtime/`): a self-contained
package copied into the tracker image as `sbtracker`; it never imports the rest of statebox,
so what runs in the sandbox is exactly what the image holds.
"""
