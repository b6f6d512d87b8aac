"""sbtracker: the code that runs INSIDE the tracker sandbox image.

It imports only the standard library, numpy, OpenCV and the detector stack (torch,
ultralytics, supervision, trackers), never `statebox`, because the image carries a copy
of this folder (as the package `sbtracker`) and nothing else of statebox. Modules:
`netguard` (records and refuses network attempts), `decode` (frames in their own thread),
`decode_process` (in a child process, through shared memory), `decode_torchcodec` (torchcodec /
NVDEC), `decoders` (which one: `--decoder`),
`detect` (batched YOLO inference), `track` (ByteTrack), `programs` (question -> tracking
program), `train` (ultralytics training), `cli` (the entry point the host calls).
"""
