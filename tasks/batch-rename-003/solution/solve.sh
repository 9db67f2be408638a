#!/bin/bash
cd /app/heron && for f in *.jpeg; do mv "$f" "${f%.jpeg}.jpg"; done
