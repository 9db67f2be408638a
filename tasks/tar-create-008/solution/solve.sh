#!/bin/bash
cd /app && tar czf /app/proud-summit.tar.gz goblet/*.cfg
