#!/bin/bash
cd /app/flint && for f in *.text; do mv "$f" "${f%.text}.txt"; done
