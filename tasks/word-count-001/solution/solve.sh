#!/bin/bash
wc -l < /app/docs/proud_dolphin.txt > /app/heron.txt
