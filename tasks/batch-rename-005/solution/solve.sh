#!/bin/bash
cd /app/dragon && for f in *.yml; do mv "$f" "${f%.yml}.yaml"; done
