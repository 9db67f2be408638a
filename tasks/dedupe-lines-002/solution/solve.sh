#!/bin/bash
awk '!seen[$0]++' /app/arrow.txt > /app/unique.txt
