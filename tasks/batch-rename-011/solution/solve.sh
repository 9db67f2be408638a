#!/bin/bash
cd /app/thunder && for f in *.htm; do mv "$f" "${f%.htm}.html"; done
