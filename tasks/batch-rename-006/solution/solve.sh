#!/bin/bash
cd /app/tiger && for f in *.htm; do mv "$f" "${f%.htm}.html"; done
