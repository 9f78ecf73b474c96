from onnxroof.cli import run

run()
