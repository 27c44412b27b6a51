"""ONNX in and out: load.py (ONNX file -> canonical IR, standard GRU and Dropout imported as our
ops), save.py (IR -> .onnx, fusebridge-domain or portable), lowering.py (our ops -> standard
ONNX subgraphs for the portable file)."""
