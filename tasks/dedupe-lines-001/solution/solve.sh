#!/bin/bash
awk '!seen[$0]++' /app/pine.txt > /app/unique.txt
