#!/bin/bash
awk '!seen[$0]++' /app/prism.txt > /app/unique.txt
