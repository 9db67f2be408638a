#!/bin/bash
awk '!seen[$0]++' /app/fox.txt > /app/unique.txt
